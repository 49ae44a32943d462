// The contract between the DNS wire server (src/dns/server.ts) and what answers for the zones (src/dns/authority.ts):
// the server owns packets, transports, EDNS and abuse limits; the authority owns names and records.
import type { Answer } from 'dns-packet';

/** One question, names lower-cased and without the trailing dot. */
export interface DnsQuestion {
  name: string;
  /** The record type's mnemonic as dns-packet names it ('A', 'AAAA', 'CNAME', 'SOA', 'NS', 'TXT', …). */
  type: string;
}

/** Who asked: the packet's source, and the EDNS Client Subnet option (RFC 7871) when the query carried one. */
export interface DnsClient {
  address: string;
  subnet?: { family: 4 | 6; address: string; sourcePrefix: number };
}

export type DnsRcode = 'NOERROR' | 'NXDOMAIN' | 'REFUSED' | 'SERVFAIL';

export interface DnsResponse {
  rcode: DnsRcode;
  /** AA: set for names inside the server's zones, clear with REFUSED. */
  authoritative: boolean;
  answers: Answer[];
  /** SOA for NXDOMAIN and NODATA (negative caching, RFC 2308), NS otherwise when useful. */
  authorities: Answer[];
  /**
   * The ECS scope prefix length the answer depends on (RFC 7871 §7.2.1): the source prefix for an answer chosen by
   * region, 0 for one that is the same for every client. Absent: 0.
   */
  ecsScope?: number;
}

export interface DnsAuthority {
  answer(question: DnsQuestion, client: DnsClient): DnsResponse;
}
