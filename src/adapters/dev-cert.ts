/**
 * Development certificates for WebTransport with `serverCertificateHashes`: an ECDSA P-256,
 * self-signed X.509 v3 certificate valid at most 14 days, its SHA-256 hash, and a rotation helper
 * that always has the current and the next certificate so clients can be given both hashes.
 *
 * Why these rules: Chromium accepts a pinned (hash-only) certificate only if its key is ECDSA P-256
 * (RSA is refused), its total validity is ≤ 14 days and it is valid now (w3c/webtransport#375).
 * Production servers should use a CA-signed certificate and no hashes; hashes are for development,
 * tests and IP-addressed hosts.
 *
 * Runtime-agnostic: only WebCrypto (`crypto.subtle`) and a small hand-written DER encoder, so the same
 * file runs in Node, Deno, Bun and browsers.
 *
 * @example
 * ```ts
 * const cert = await createDevCertificate();              // 13 days, SAN localhost + 127.0.0.1 + ::1
 * // Deno server:  webTransportServerTransport({ cert: cert.certPem, key: cert.keyPem })
 * // Browser:      webTransportClientTransport({ serverCertificateHashes: [cert.serverCertificateHash] })
 * ```
 *
 * @packageDocumentation
 */
import { ConfigError } from '../errors.ts';
import { toHex } from '../runtime/hex.ts';

/** Longest validity Chromium accepts for a hash-pinned certificate: 14 days, in ms. */
export const MAX_DEV_CERT_VALIDITY_MS = 14 * 24 * 3600 * 1000;

/** Default validity of {@link createDevCertificate}: 13 days (a margin under the 14-day rule), in ms. */
export const DEFAULT_DEV_CERT_VALIDITY_MS = 13 * 24 * 3600 * 1000;

/** One entry of the WebTransport `serverCertificateHashes` option. */
export interface CertificateHash {
  readonly algorithm: 'sha-256';
  readonly value: Uint8Array<ArrayBuffer>;
}

/** Options of {@link createDevCertificate}. */
export interface DevCertificateOptions {
  /** Subject common name. Defaults to the first DNS name, or `localhost`. */
  readonly commonName?: string;
  /** DNS names in the subjectAltName. Defaults to `['localhost']`. */
  readonly dnsNames?: readonly string[];
  /** IPv4/IPv6 literals in the subjectAltName. Defaults to `['127.0.0.1', '::1']`. */
  readonly ipAddresses?: readonly string[];
  /** Start of validity. Defaults to one minute before now (tolerates small clock skew). */
  readonly notBefore?: Date;
  /** Validity length in ms, at most 14 days. Defaults to 13 days. */
  readonly validityMs?: number;
}

/** A generated certificate, its key and its hash. */
export interface DevCertificate {
  /** The certificate, PEM (`-----BEGIN CERTIFICATE-----`), as Deno's `QuicEndpoint.listen({ cert })` wants. */
  readonly certPem: string;
  /** The private key, PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as `listen({ key })` wants. */
  readonly keyPem: string;
  /** The certificate, DER. */
  readonly der: Uint8Array<ArrayBuffer>;
  /** SHA-256 of {@link DevCertificate.der}. */
  readonly hash: Uint8Array<ArrayBuffer>;
  /** {@link DevCertificate.hash} as lower-case hex. */
  readonly hashHex: string;
  /** Ready for `new WebTransport(url, { serverCertificateHashes: [this] })`. */
  readonly serverCertificateHash: CertificateHash;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

/** Generate a self-signed ECDSA P-256 certificate for development and tests. */
export async function createDevCertificate(options: DevCertificateOptions = {}): Promise<DevCertificate> {
  const subtle = globalThis.crypto?.subtle;
  if (subtle === undefined)
    throw new ConfigError(
      'crypto.subtle',
      'needs WebCrypto (crypto.subtle), which this runtime lacks (browsers: a secure context)',
      { where: 'createDevCertificate' },
    );
  const validityMs = options.validityMs ?? DEFAULT_DEV_CERT_VALIDITY_MS;
  if (!Number.isFinite(validityMs) || validityMs <= 0 || validityMs > MAX_DEV_CERT_VALIDITY_MS) {
    throw new ConfigError(
      'validityMs',
      `validityMs must be in (0, ${MAX_DEV_CERT_VALIDITY_MS}] (14 days: Chromium refuses a longer hash-pinned certificate), got ${validityMs}`,
      { where: 'createDevCertificate' },
    );
  }
  const dnsNames = options.dnsNames ?? ['localhost'];
  const ips = (options.ipAddresses ?? ['127.0.0.1', '::1']).map(parseIp);
  const commonName = options.commonName ?? dnsNames[0] ?? 'localhost';
  // Whole seconds: UTCTime has second precision, and the dates we report must be the encoded ones.
  const notBefore = new Date(Math.floor((options.notBefore?.getTime() ?? Date.now() - 60_000) / 1000) * 1000);
  const notAfter = new Date(notBefore.getTime() + Math.floor(validityMs / 1000) * 1000);

  const keys = (await subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as CryptoKeyPair;
  const spki = new Uint8Array(await subtle.exportKey('spki', keys.publicKey));
  const pkcs8 = new Uint8Array(await subtle.exportKey('pkcs8', keys.privateKey));

  const serial = globalThis.crypto.getRandomValues(new Uint8Array(16));
  serial[0] = ((serial[0] as number) & 0x7f) | 0x40; // positive and exactly 16 bytes long
  const name = seq(set(seq(oid(OID_COMMON_NAME), utf8(commonName))));
  const san: Uint8Array[] = [
    ...dnsNames.map((d) => tlv(0x82, ascii(d))), // [2] dNSName
    ...ips.map((ip) => tlv(0x87, ip)), // [7] iPAddress
  ];
  const extensions = seq(
    extension(OID_BASIC_CONSTRAINTS, true, seq()),
    extension(OID_KEY_USAGE, true, tlv(0x03, Uint8Array.of(0x07, 0x80))), // digitalSignature
    extension(OID_EXT_KEY_USAGE, false, seq(oid(OID_SERVER_AUTH))),
    extension(OID_SUBJECT_ALT_NAME, false, seq(...san)),
  );
  const tbs = seq(
    tlv(0xa0, integer(Uint8Array.of(2))), // [0] version v3
    integer(serial),
    seq(oid(OID_ECDSA_SHA256)),
    name,
    seq(time(notBefore), time(notAfter)),
    name,
    spki,
    tlv(0xa3, extensions), // [3] extensions
  );
  const p1363 = new Uint8Array(await subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, keys.privateKey, tbs));
  const der = seq(tbs, seq(oid(OID_ECDSA_SHA256)), tlv(0x03, concat(Uint8Array.of(0), ecdsaSignatureDer(p1363))));
  const hash = new Uint8Array(await subtle.digest('SHA-256', der));
  return {
    certPem: pem('CERTIFICATE', der),
    keyPem: pem('PRIVATE KEY', pkcs8),
    der,
    hash,
    hashHex: toHex(hash),
    serverCertificateHash: { algorithm: 'sha-256', value: hash },
    notBefore,
    notAfter,
  };
}

// ---------------------------------------------------------------------------------------------
// Rotation
// ---------------------------------------------------------------------------------------------

/** Options of {@link createCertificateRotation}. */
export interface CertificateRotationOptions extends Omit<DevCertificateOptions, 'notBefore'> {
  /**
   * How long the current and the next certificate are both valid; the next one starts this long
   * before the current one ends, and that is when {@link CertificateRotation.rotateAt} falls.
   * Defaults to 1 hour.
   */
  readonly overlapMs?: number;
}

/**
 * The current certificate (serve it now) and the next one (starts before the current one ends).
 * Give clients {@link CertificateRotation.hashes} — both hashes — so a client that fetched them
 * before a rotation still connects after it.
 */
export interface CertificateRotation {
  readonly current: DevCertificate;
  readonly next: DevCertificate;
  /** When to call {@link CertificateRotation.rotate}: the start of `next`'s validity. */
  readonly rotateAt: Date;
  /** `serverCertificateHashes` for clients: current and next. */
  hashes(): CertificateHash[];
  /** Make `next` current and generate a new `next`; returns the new current certificate. */
  rotate(): Promise<DevCertificate>;
  /** {@link CertificateRotation.rotate} if `now` is at or past `rotateAt`; true if it rotated. */
  rotateIfDue(now?: Date): Promise<boolean>;
}

/** Create a rotation: a current certificate valid from now and a next one overlapping its end. */
export async function createCertificateRotation(
  options: CertificateRotationOptions = {},
): Promise<CertificateRotation> {
  const { overlapMs = 3600_000, ...certOptions } = options;
  const validityMs = certOptions.validityMs ?? DEFAULT_DEV_CERT_VALIDITY_MS;
  if (!Number.isFinite(overlapMs) || overlapMs < 0 || overlapMs >= validityMs / 2) {
    throw new ConfigError('overlapMs', `overlapMs must be in [0, validityMs/2), got ${overlapMs}`, {
      where: 'createCertificateRotation',
    });
  }
  const after = (c: DevCertificate): Promise<DevCertificate> =>
    createDevCertificate({ ...certOptions, notBefore: new Date(c.notAfter.getTime() - overlapMs) });
  let current = await createDevCertificate(certOptions);
  let next = await after(current);
  const rotation: CertificateRotation = {
    get current() {
      return current;
    },
    get next() {
      return next;
    },
    get rotateAt() {
      return next.notBefore;
    },
    hashes: () => [current.serverCertificateHash, next.serverCertificateHash],
    async rotate() {
      const fresh = await after(next);
      current = next;
      next = fresh;
      return current;
    },
    async rotateIfDue(now = new Date()) {
      if (now.getTime() < next.notBefore.getTime()) return false;
      await rotation.rotate();
      return true;
    },
  };
  return rotation;
}

/** Parse a 64-hex-digit SHA-256 (as printed by `openssl x509 -fingerprint -sha256`, colons allowed). */
export function certificateHashFromHex(hex: string): CertificateHash {
  const clean = hex.replace(/[:\s]/g, '');
  if (!/^[0-9a-fA-F]{64}$/.test(clean))
    throw new ConfigError('hex', `not a SHA-256 hex digest: ${hex.slice(0, 80)}`, { where: 'certificateHashFromHex' });
  const value = new Uint8Array(32);
  for (let i = 0; i < 32; i++) value[i] = parseInt(clean.slice(2 * i, 2 * i + 2), 16);
  return { algorithm: 'sha-256', value };
}

// ---------------------------------------------------------------------------------------------
// DER (X.690) encoding: just the types an X.509 certificate needs
// ---------------------------------------------------------------------------------------------

const OID_COMMON_NAME = '2.5.4.3';
const OID_ECDSA_SHA256 = '1.2.840.10045.4.3.2';
const OID_BASIC_CONSTRAINTS = '2.5.29.19';
const OID_KEY_USAGE = '2.5.29.15';
const OID_EXT_KEY_USAGE = '2.5.29.37';
const OID_SUBJECT_ALT_NAME = '2.5.29.17';
const OID_SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

function concat(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  let n = 0;
  for (const p of parts) n += p.byteLength;
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

/** Tag, definite length, value. */
function tlv(tag: number, value: Uint8Array): Uint8Array<ArrayBuffer> {
  const len = value.byteLength;
  let head: number[];
  if (len < 0x80) head = [tag, len];
  else {
    const bytes: number[] = [];
    for (let v = len; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    head = [tag, 0x80 | bytes.length, ...bytes];
  }
  return concat(Uint8Array.from(head), value);
}

function seq(...items: Uint8Array[]): Uint8Array<ArrayBuffer> {
  return tlv(0x30, concat(...items));
}

function set(...items: Uint8Array[]): Uint8Array<ArrayBuffer> {
  return tlv(0x31, concat(...items));
}

/** INTEGER from unsigned big-endian bytes: minimal, with a 0x00 pad when the top bit is set. */
function integer(unsigned: Uint8Array): Uint8Array<ArrayBuffer> {
  let i = 0;
  while (i < unsigned.byteLength - 1 && unsigned[i] === 0) i++;
  const body = unsigned.subarray(i);
  return tlv(0x02, ((body[0] as number) & 0x80) !== 0 ? concat(Uint8Array.of(0), body) : body);
}

function oid(dotted: string): Uint8Array<ArrayBuffer> {
  const arcs = dotted.split('.').map(Number);
  const out: number[] = [40 * (arcs[0] as number) + (arcs[1] as number)];
  for (const arc of arcs.slice(2)) {
    const base128: number[] = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) base128.unshift(0x80 | (v & 0x7f));
    out.push(...base128);
  }
  return tlv(0x06, Uint8Array.from(out));
}

function utf8(s: string): Uint8Array<ArrayBuffer> {
  return tlv(0x0c, new TextEncoder().encode(s));
}

function ascii(s: string): Uint8Array<ArrayBuffer> {
  if (!/^[\x21-\x7e]+$/.test(s))
    throw new ConfigError('dnsNames', `not an ASCII DNS name: ${JSON.stringify(s)}`, { where: 'createDevCertificate' });
  return new TextEncoder().encode(s);
}

/** UTCTime (YYMMDDHHMMSSZ) through 2049, GeneralizedTime after, as RFC 5280 §4.1.2.5 requires. */
function time(d: Date): Uint8Array<ArrayBuffer> {
  const p = (n: number): string => String(n).padStart(2, '0');
  const y = d.getUTCFullYear();
  const rest = `${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}Z`;
  if (y >= 1950 && y < 2050) return tlv(0x17, new TextEncoder().encode(`${p(y % 100)}${rest}`));
  return tlv(0x18, new TextEncoder().encode(`${String(y).padStart(4, '0')}${rest}`));
}

function extension(id: string, critical: boolean, value: Uint8Array): Uint8Array<ArrayBuffer> {
  return seq(oid(id), ...(critical ? [Uint8Array.of(0x01, 0x01, 0xff)] : []), tlv(0x04, value));
}

/** WebCrypto signs ECDSA as r‖s (IEEE P1363); X.509 wants SEQUENCE { INTEGER r, INTEGER s }. */
function ecdsaSignatureDer(p1363: Uint8Array): Uint8Array<ArrayBuffer> {
  const half = p1363.byteLength / 2;
  return seq(integer(p1363.subarray(0, half)), integer(p1363.subarray(half)));
}

/** IPv4 dotted quad or IPv6 (with `::`) to network-order bytes. */
function parseIp(ip: string): Uint8Array<ArrayBuffer> {
  const bad = (): never => {
    throw new ConfigError('ipAddresses', `not an IP address literal: ${JSON.stringify(ip)}`, {
      where: 'createDevCertificate',
    });
  };
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(ip)) {
    const parts = ip.split('.').map(Number);
    if (parts.some((n) => n > 255)) bad();
    return Uint8Array.from(parts);
  }
  if (!/^[0-9a-fA-F:]+$/.test(ip) || ip.split('::').length > 2) return bad();
  const [headText = '', tailText] = ip.split('::');
  const groups = (t: string): number[] =>
    t === '' ? [] : t.split(':').map((g) => (/^[0-9a-fA-F]{1,4}$/.test(g) ? parseInt(g, 16) : bad()));
  const head = groups(headText);
  const tail = tailText === undefined ? [] : groups(tailText);
  const fill = 8 - head.length - tail.length;
  if ((tailText === undefined && fill !== 0) || fill < 0) bad();
  const all = [...head, ...new Array<number>(fill).fill(0), ...tail];
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 0xff;
  });
  return out;
}

function pem(label: string, der: Uint8Array): string {
  let bin = '';
  for (const b of der) bin += String.fromCharCode(b);
  const b64 = btoa(bin);
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}
