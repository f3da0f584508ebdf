import { formatBinaryQuantity, isQuantity, parseQuantity, quantityValue } from './quantity.js';

test.each([
  ['128Mi', 134217728],
  ['2Gi', 2 * 2 ** 30],
  ['1Ki', 1024],
  ['1Ti', 2 ** 40],
  ['500m', 0.5],
  ['1G', 1e9],
  ['1k', 1000],
  ['1M', 1e6],
  ['1E', 1e18],
  ['1Ei', 2 ** 60],
  ['3Ei', 3 * 2 ** 60],
  ['1e3', 1000],
  ['1E3', 1000],
  ['1.5Gi', 1.5 * 2 ** 30],
  ['0.5', 0.5],
  ['.5', 0.5],
  ['+2', 2],
  ['-1', -1],
  ['100u', 100e-6],
  ['3n', 3e-9],
  ['0', 0],
  [4, 4],
  [0.25, 0.25],
] as const)('parseQuantity(%p) = %p', (q, want) => {
  expect(parseQuantity(q)).toBeCloseTo(want, 12);
  expect(isQuantity(q)).toBe(true);
});

test.each(['', 'Mi', '12xx', '1KB', '1K', '1 Gi', ' 1Gi', '1.2.3', 'abc', '1ii', '--1', '1e', '0x10'])(
  'parseQuantity(%p) throws',
  (q) => {
    expect(() => parseQuantity(q)).toThrow(/invalid quantity/);
    expect(isQuantity(q)).toBe(false);
  },
);

test('out-of-range exponents are rejected', () => {
  expect(() => parseQuantity('1e400')).toThrow(/out of range/);
  expect(isQuantity('1e400')).toBe(false);
});

test('non-finite numbers and other types are not quantities', () => {
  expect(() => parseQuantity(Number.NaN)).toThrow(/invalid quantity/);
  expect(() => parseQuantity(Infinity)).toThrow(/invalid quantity/);
  expect(() => parseQuantity({} as unknown as string)).toThrow(/invalid quantity/);
  expect(isQuantity(null)).toBe(false);
});

test('quantityValue rounds up like resource.Quantity.Value()', () => {
  expect(quantityValue('1500m')).toBe(2);
  expect(quantityValue('2')).toBe(2);
  expect(quantityValue('100m')).toBe(1);
});

test('formatBinaryQuantity picks the largest exact binary suffix', () => {
  expect(formatBinaryQuantity(134217728)).toBe('128Mi');
  expect(formatBinaryQuantity(2 ** 30)).toBe('1Gi');
  expect(formatBinaryQuantity(3072)).toBe('3Ki');
  expect(formatBinaryQuantity(1536)).toBe('1536');
});
