import { parseManifests } from '../manifests.js';
import { validateObject } from '../validate.js';

/** Whether an apiVersion belongs to KubeVirt (kubevirt.io or a *.kubevirt.io group). */
export function isKubeVirtApiVersion(apiVersion: string): boolean {
  const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.lastIndexOf('/')) : '';
  return group === 'kubevirt.io' || group.endsWith('.kubevirt.io');
}

/** The outcome of one file: its error lines, and the documents of other APIs that were not validated. */
export interface FileCheck {
  /** refused: at least one error; skipped: no document of a KubeVirt API; accepted: otherwise */
  verdict: 'accepted' | 'refused' | 'skipped';
  /** `FILE: <path>: <reason>` lines, [] when nothing is wrong */
  errors: string[];
  /** the documents not validated (not a KubeVirt kind), as `Kind apiVersion` */
  skipped: string[];
}

/**
 * Check the text of one file. A document of another API (e.g. a v1 ConfigMap or a scheduling.k8s.io PriorityClass
 * an example ships with its VM) is not KubeVirt's to validate: it is listed in `skipped`, not refused. Every other
 * document is validated; when a file holds several documents, each reason ends with `(document N)`.
 */
export function checkFile(file: string, text: string): FileCheck {
  let docs: unknown[];
  try {
    docs = parseManifests(text);
  } catch (err) {
    // the parser's first line ends with ':' before its code frame, which one line cannot show
    const msg = (err as Error).message.split('\n')[0]!.replace(/:\s*$/, '');
    return { verdict: 'refused', errors: [`${file}: (syntax): ${msg}`], skipped: [] };
  }
  if (docs.length === 0)
    return { verdict: 'refused', errors: [`${file}: (file): no manifests found`], skipped: [] };
  const errors: string[] = [];
  const skipped: string[] = [];
  docs.forEach((doc, i) => {
    const d = doc as { apiVersion?: unknown; kind?: unknown } | null;
    if (
      typeof d?.apiVersion === 'string' &&
      typeof d.kind === 'string' &&
      d.kind !== '' &&
      !isKubeVirtApiVersion(d.apiVersion)
    ) {
      skipped.push(`${d.kind} ${d.apiVersion}`);
      return;
    }
    const suffix = docs.length > 1 ? ` (document ${i + 1})` : '';
    for (const e of validateObject(doc))
      errors.push(`${file}: ${e.path === '' ? '(root)' : e.path}: ${e.reason}${suffix}`);
  });
  const verdict = errors.length ? 'refused' : skipped.length === docs.length ? 'skipped' : 'accepted';
  return { verdict, errors, skipped };
}

/**
 * Validate the text of one file; returns the error lines (`FILE: <path>: <reason>`), [] when valid (documents
 * of other APIs are not validated: see {@link checkFile}).
 */
export function validateFile(file: string, text: string): string[] {
  return checkFile(file, text).errors;
}
