import { ControllerExpectations, EXPECTATIONS_TIMEOUT_MS } from './expectations.js';

describe('ControllerExpectations', () => {
  let now = 1_000_000;
  const clock = () => now;

  it('an unknown key is satisfied', () => {
    const e = new ControllerExpectations(EXPECTATIONS_TIMEOUT_MS, clock);
    expect(e.satisfiedExpectations('ns/a')).toBe(true);
    expect(e.pendingAdds('ns/a')).toBe(0);
  });

  it('expected creations block until the informer observes them', () => {
    const e = new ControllerExpectations(EXPECTATIONS_TIMEOUT_MS, clock);
    e.expectCreations('ns/a', 2);
    expect(e.satisfiedExpectations('ns/a')).toBe(false);
    expect(e.pendingAdds('ns/a')).toBe(2);
    e.creationObserved('ns/a');
    expect(e.satisfiedExpectations('ns/a')).toBe(false);
    e.creationObserved('ns/a');
    expect(e.satisfiedExpectations('ns/a')).toBe(true);
    e.creationObserved('ns/a'); // extra events do not break it
    expect(e.satisfiedExpectations('ns/a')).toBe(true);
    expect(e.satisfiedExpectations('ns/b')).toBe(true);
  });

  it('expected deletions likewise; raise adds to a record, delete forgets it', () => {
    const e = new ControllerExpectations(EXPECTATIONS_TIMEOUT_MS, clock);
    e.expectDeletions('k', 1);
    e.raiseExpectations('k', 1, 0);
    expect(e.getExpectations('k')).toMatchObject({ add: 1, del: 1 });
    e.deletionObserved('k');
    expect(e.satisfiedExpectations('k')).toBe(false);
    e.creationObserved('k');
    expect(e.satisfiedExpectations('k')).toBe(true);
    e.expectCreations('k', 1);
    e.deleteExpectations('k');
    expect(e.satisfiedExpectations('k')).toBe(true);
    expect(e.getExpectations('k')).toBeUndefined();
  });

  it('a record older than the timeout counts as satisfied (a lost event cannot wedge the key)', () => {
    const e = new ControllerExpectations(EXPECTATIONS_TIMEOUT_MS, clock);
    e.expectCreations('k', 1);
    now += EXPECTATIONS_TIMEOUT_MS;
    expect(e.satisfiedExpectations('k')).toBe(false);
    now += 1;
    expect(e.satisfiedExpectations('k')).toBe(true);
    expect(e.pendingAdds('k')).toBe(0);
  });

  it('a failed create lowers the expectation it raised', () => {
    const e = new ControllerExpectations(EXPECTATIONS_TIMEOUT_MS, clock);
    e.expectCreations('k', 1);
    e.lowerExpectations('k', 1, 0);
    expect(e.satisfiedExpectations('k')).toBe(true);
  });
});
