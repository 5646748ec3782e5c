/** Lower-case hex of some bytes, two digits each. */
export function toHex(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += (b < 16 ? '0' : '') + b.toString(16);
  return s;
}
