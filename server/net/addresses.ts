/**
 * Which IP addresses an outbound fetch may connect to. IPv4 is a blocklist of the special-purpose
 * ranges (IANA registry); IPv6 is an allowlist of global unicast (2000::/3) minus its special
 * ranges, because the v6 space outside it (::1, fc00::/7, fe80::/10, ff00::/8, ...) is never a
 * legitimate public host. IPv4 embedded in IPv6 (mapped, NAT64) is judged as the IPv4 it carries.
 */
import { BlockList, isIP } from 'node:net';

const NON_PUBLIC_V4 = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata endpoints
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
] as const) {
  NON_PUBLIC_V4.addSubnet(network, prefix, 'ipv4');
}

const GLOBAL_UNICAST_V6 = new BlockList();
GLOBAL_UNICAST_V6.addSubnet('2000::', 3, 'ipv6');

const NON_PUBLIC_V6 = new BlockList();
for (const [network, prefix] of [
  ['2001::', 23], // IETF protocol assignments, including Teredo (2001::/32), which tunnels to IPv4
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: carries an arbitrary IPv4 address, private ones included
  ['3fff::', 20], // documentation
] as const) {
  NON_PUBLIC_V6.addSubnet(network, prefix, 'ipv6');
}

/** Lower-case, compressed form (`::ffff:7f00:1`), or undefined when it is not an IPv6 literal we accept. */
function canonicalV6(address: string): string | undefined {
  // A zone id (fe80::1%eth0) only ever qualifies link-local addresses.
  if (address.includes('%')) return undefined;
  try {
    return new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
}

function embeddedV4(hi: string, lo: string): string {
  const a = parseInt(hi, 16);
  const b = parseInt(lo, 16);
  return `${a >> 8}.${a & 0xff}.${b >> 8}.${b & 0xff}`;
}

/** True only for an address a public web server may have; anything else (or not an IP at all) is false. */
export function isPublicAddress(address: string): boolean {
  const version = isIP(address);
  if (version === 4) return !NON_PUBLIC_V4.check(address, 'ipv4');
  if (version !== 6) return false;
  const v6 = canonicalV6(address);
  if (v6 === undefined) return false;
  // ::ffff:a.b.c.d (mapped) and 64:ff9b::a.b.c.d (NAT64): the connection really goes to the IPv4 address.
  const embedded = /^(?:::ffff|64:ff9b:):([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (embedded) return isPublicAddress(embeddedV4(embedded[1]!, embedded[2]!));
  return GLOBAL_UNICAST_V6.check(v6, 'ipv6') && !NON_PUBLIC_V6.check(v6, 'ipv6');
}

/**
 * Explicit exceptions (`10.1.2.3`, `10.0.0.0/8`, `fd00::/8`) for deployments that must reach one
 * internal host, without opening every private address as `allowPrivate` does.
 */
export function addressAllowList(entries: readonly string[]): (address: string) => boolean {
  const list = new BlockList();
  for (const entry of entries) {
    const [network = '', prefix] = entry.split('/');
    const family = isIP(network);
    if (family === 0) throw new TypeError(`Not an IP address or CIDR range: ${entry}`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (prefix === undefined) list.addAddress(network, type);
    else list.addSubnet(network, Number(prefix), type);
  }
  return (address) => {
    const family = isIP(address);
    return family !== 0 && list.check(address, family === 4 ? 'ipv4' : 'ipv6');
  };
}
