// The development certificate helper: what Chromium demands of a hash-pinned certificate (ECDSA
// P-256, ≤ 14 days, valid now), a SAN for 127.0.0.1/localhost, hash = SHA-256(DER), a PEM pair Deno
// and openssl load, and rotation that serves current + next. Chromium accepting it for real is in
// chromium.test.ts.
import { X509Certificate, createHash, createPrivateKey, createPublicKey } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  MAX_DEV_CERT_VALIDITY_MS,
  certificateHashFromHex,
  createCertificateRotation,
  createDevCertificate,
} from '../../src/adapters/dev-cert.ts';
import { scratchDir } from '../support/scratch.ts';

const DAY = 24 * 3600 * 1000;

/** Minimal DER walker: the children of the outer SEQUENCE, to check the structure independently of Node's parser. */
function derChildren(der: Uint8Array): { tag: number; len: number }[] {
  const out: { tag: number; len: number }[] = [];
  const readLen = (at: number): [number, number] => {
    const first = der[at] as number;
    if (first < 0x80) return [first, at + 1];
    let len = 0;
    for (let i = 0; i < (first & 0x7f); i++) len = len * 256 + (der[at + 1 + i] as number);
    return [len, at + 1 + (first & 0x7f)];
  };
  const [total, start] = readLen(1);
  expect(der[0]).toBe(0x30);
  expect(start + total).toBe(der.byteLength);
  let off = start;
  while (off < der.byteLength) {
    const tag = der[off] as number;
    const [len, body] = readLen(off + 1);
    out.push({ tag, len });
    off = body + len;
  }
  return out;
}

describe('dev certificate (WebCrypto, hand-written DER)', () => {
  it('is a self-signed X.509 v3 ECDSA P-256 certificate, ≤ 14 days, with SAN and hash = sha256(DER)', async () => {
    const before = Date.now();
    const c = await createDevCertificate();
    // Outer structure: tbsCertificate, signatureAlgorithm, signatureValue (BIT STRING).
    expect(derChildren(c.der).map((x) => x.tag)).toEqual([0x30, 0x30, 0x03]);
    const x = new X509Certificate(c.der);
    expect(x.publicKey.asymmetricKeyType).toBe('ec');
    expect(x.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(x.verify(x.publicKey)).toBe(true);
    expect(x.issuer).toBe(x.subject);
    expect(x.subject).toBe('CN=localhost');
    expect(x.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect(x.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(x.checkHost('localhost')).toBe('localhost');
    expect(x.ca).toBe(false);
    const from = new Date(x.validFrom).getTime();
    const to = new Date(x.validTo).getTime();
    expect(from).toBe(c.notBefore.getTime());
    expect(to).toBe(c.notAfter.getTime());
    expect(to - from).toBeLessThanOrEqual(MAX_DEV_CERT_VALIDITY_MS);
    expect(to - from).toBe(13 * DAY);
    expect(from).toBeLessThanOrEqual(before);
    expect(to).toBeGreaterThan(Date.now() + 12 * DAY);
    const sha = createHash('sha256').update(c.der).digest();
    expect(Buffer.from(c.hash).equals(sha)).toBe(true);
    expect(c.hashHex).toBe(sha.toString('hex'));
    expect(x.fingerprint256.replace(/:/g, '').toLowerCase()).toBe(c.hashHex);
    expect(c.serverCertificateHash).toEqual({ algorithm: 'sha-256', value: c.hash });
    // The PEM pair: the certificate parses back to the same DER, the key is PKCS#8 EC and matches it.
    expect(new X509Certificate(c.certPem).raw.equals(Buffer.from(c.der))).toBe(true);
    expect(c.keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const key = createPrivateKey(c.keyPem);
    expect(key.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(x.checkPrivateKey(key)).toBe(true);
    expect(
      createPublicKey(key)
        .export({ type: 'spki', format: 'der' })
        .equals(x.publicKey.export({ type: 'spki', format: 'der' })),
    ).toBe(true);
  });

  it('openssl reads it: version 3, ecdsa-with-SHA256, serverAuth, critical key usage', async () => {
    const c = await createDevCertificate({
      dnsNames: ['example.test', 'localhost'],
      ipAddresses: ['10.1.2.3', 'fe80::1:2'],
      validityMs: 2 * DAY,
    });
    const dir = scratchDir('lanemux-cert-');
    try {
      writeFileSync(join(dir, 'c.pem'), c.certPem);
      const text = execFileSync('openssl', ['x509', '-in', join(dir, 'c.pem'), '-noout', '-text'], {
        encoding: 'utf8',
      });
      expect(text).toContain('Version: 3 (0x2)');
      expect(text).toContain('Signature Algorithm: ecdsa-with-SHA256');
      expect(text).toContain('ASN1 OID: prime256v1');
      expect(text).toContain('Subject: CN = example.test');
      expect(text).toMatch(/X509v3 Key Usage: critical\s+Digital Signature/);
      expect(text).toContain('TLS Web Server Authentication');
      expect(text).toContain('DNS:example.test, DNS:localhost, IP Address:10.1.2.3, IP Address:FE80:0:0:0:0:0:1:2');
      const v = execFileSync(
        'openssl',
        ['verify', '-CAfile', join(dir, 'c.pem'), '-purpose', 'sslserver', join(dir, 'c.pem')],
        { encoding: 'utf8' },
      );
      expect(v.trim()).toMatch(/OK$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses validity over 14 days and bad SAN entries', async () => {
    await expect(createDevCertificate({ validityMs: 14 * DAY + 1000 })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    });
    await expect(createDevCertificate({ validityMs: 0 })).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG' });
    await expect(createDevCertificate({ ipAddresses: ['300.1.1.1'] })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    });
    await expect(createDevCertificate({ ipAddresses: ['1::2::3'] })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    });
    await expect(createDevCertificate({ dnsNames: ['bad name'] })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    });
    const max = await createDevCertificate({ validityMs: MAX_DEV_CERT_VALIDITY_MS });
    expect(max.notAfter.getTime() - max.notBefore.getTime()).toBe(MAX_DEV_CERT_VALIDITY_MS);
  });

  it('parses hex digests, with or without colons', async () => {
    const c = await createDevCertificate();
    const fp = new X509Certificate(c.der).fingerprint256;
    expect(certificateHashFromHex(fp)).toEqual(c.serverCertificateHash);
    expect(certificateHashFromHex(c.hashHex)).toEqual(c.serverCertificateHash);
    expect(() => certificateHashFromHex('abcd')).toThrow(/SHA-256/);
  });

  it('rotation keeps current + next (overlapping by overlapMs) and serves both hashes', async () => {
    const r = await createCertificateRotation({ validityMs: 3 * DAY, overlapMs: 3600_000 });
    const { current, next } = r;
    expect(r.hashes()).toEqual([current.serverCertificateHash, next.serverCertificateHash]);
    expect(current.hashHex).not.toBe(next.hashHex);
    expect(next.notBefore.getTime()).toBe(current.notAfter.getTime() - 3600_000);
    expect(r.rotateAt).toEqual(next.notBefore);
    for (const c of [current, next])
      expect(c.notAfter.getTime() - c.notBefore.getTime()).toBeLessThanOrEqual(MAX_DEV_CERT_VALIDITY_MS);
    expect(await r.rotateIfDue(new Date(r.rotateAt.getTime() - 1))).toBe(false);
    expect(r.current).toBe(current);
    expect(await r.rotateIfDue(r.rotateAt)).toBe(true);
    expect(r.current).toBe(next);
    expect(r.next.notBefore.getTime()).toBe(next.notAfter.getTime() - 3600_000);
    expect(r.hashes()[0]).toEqual(next.serverCertificateHash);
    await expect(createCertificateRotation({ validityMs: DAY, overlapMs: DAY })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    });
  });
});
