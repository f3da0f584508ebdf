import { parseQuantity, quantityValue as apiQuantityValue } from '@kubevirt-ts/api';
import { ConversionError } from './errors.js';
import type { Quantity } from './vmi.js';

/** A Kubernetes quantity as a number; a bad one is a ConversionError naming the field. */
export function quantity(q: Quantity, path: string): number {
  try {
    return parseQuantity(q);
  } catch (e) {
    throw new ConversionError(path, (e as Error).message);
  }
}

/** Rounded up to a whole number, as resource.Quantity.Value(). */
export function quantityValue(q: Quantity, path: string): number {
  try {
    return apiQuantityValue(q);
  } catch (e) {
    throw new ConversionError(path, (e as Error).message);
  }
}
