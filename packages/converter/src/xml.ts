// Domain model <-> libvirt domain XML: the writer (xml-write.ts: a tree of elements, every value through
// `escapeXml`, the one escaping path, never spliced into markup raw) and the reader (xml-read.ts:
// fast-xml-parser).
export { XEl, assertXmlSafe, escapeXml, renderXml, toDomainXml, domainElement } from './xml-write.js';
export { parseDomainXml } from './xml-read.js';
