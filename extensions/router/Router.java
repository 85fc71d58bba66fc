import unet.spine.Spine;

/**
 * SPINE's IP router extension (the SPINE paper, section 5.2): IPv4
 * forwarding between raw-frame ports with no host on the path, on one
 * adapter or across several (one loaded on each), and the route lookup it
 * runs (the LC-trie of Nilsson and Karlsson, over the arrays of route
 * table 0).
 *
 * <p>Handlers, installed by {@code init(first)} from {@code base}, the low
 * 16 bits of {@code first}:
 * <ul>
 * <li>{@code onFrame} ({@code base}): a frame from a port. IPv4: the
 * header is checked (ethertype, version, header length, checksum, total
 * length against the frame, TTL), the destination looked up in table 0,
 * the TTL decremented with an incremental checksum update (RFC 1624), the
 * Ethernet addresses rewritten (the egress port's MAC as source, the next
 * hop's as destination) and the frame sent out of the egress port. ARP
 * requests for a port's own address are answered out of that port.
 * Frames for the router itself, with a TTL of 1 or less, without a route
 * or a known next hop, with options, ARP replies and frames of other
 * protocols go to the host application (the paper's label 3) with the
 * reason and the ingress port as arguments ({@link #HOST_FOR_ME} ...);
 * other malformed frames are dropped and counted by reason.
 * <li>{@code onConfig} ({@code base + 1}): configuration from the host
 * application, whose endpoint (the first to configure the extension: the
 * only one it takes configuration from afterwards) becomes the one frames
 * for the host go to: {@code [3, 0, 0]} and 6 bytes only claims it;
 * {@code [1, port, addr]} and the port's MAC (6 bytes) sets a port's
 * address; {@code [2, index, port]} and a MAC sets next hop
 * {@code index} (the next hops of table 0 are these indices; the port is
 * a slot, below); {@code [4, slot, addr]}, a MAC and {@code [dest, port]}
 * sets a port of another adapter (below). Each is answered with its
 * first 4 bytes.
 * <li>{@code onHostSend} ({@code base + 2}): {@code [port]} and a frame
 * (the bulk data), from the host application's endpoint: sends the frame
 * out of that port (the host's ICMP answers).
 * <li>{@code onStats} ({@code base + 3}): answers with the counters, one
 * little-endian int each, in {@link #C_FORWARDED}'s order.
 * </ul>
 *
 * <p>Several adapters (the paper's "PCI" and "Wire" cases): each adapter
 * owns some of the router's ports and is told about every port. A local
 * port is configured by its engine port id as above ({@code [1, port,
 * addr]}); a port of another adapter takes a slot from {@link #PORTS} up,
 * {@code [4, slot, addr]}, its MAC, then {@code [dest, port]}: the
 * destination of the adapter that owns it ({@code DEST_PEER << 24 |
 * index} or {@code DEST_WIRE << 24 | link}) and that adapter's port id.
 * Next hops name a slot ({@code [2, index, slot]}). A frame routed to a
 * remote port is checked, looked up and rewritten here, on the ingress
 * adapter, exactly as a local one, and its own buffer handed to the
 * owning adapter with handler {@link Spine#PORT_OUT} and the port id as
 * argument ({@link #C_HANDED}): that adapter's runtime sends it out of the
 * port as it is, with no handler run (the queue or link counts it);
 * frames for the host go to the ingress adapter's host application
 * endpoint.
 *
 * <p>The lookup: {@code trie}: one word a node, {@code kind << 27 |
 * skip << 22 | adr}: an inner node ({@code kind} 1 to 22, its branch) has
 * {@code 2^kind} children at {@code trie[adr]}; a leaf of kind 24 to 31
 * is a block whose child {@code k}, by the next {@code 31 - kind} bits,
 * names base entry {@code adr + k}; a leaf of kind 23 holds its answer,
 * {@code hops[adr - 1]} (none when {@code adr} is 0). {@code base}: the
 * base vector, each entry's prefix then its {@code len << 26 | (pre + 1)
 * << nhBits | nh} word. {@code pre}: the prefix vector, info words of
 * the same form. {@code hops}: the next hops. The host builds the trie
 * ({@code unet_router::LcTrie}, which walks the same arrays the same way)
 * and loads it as table 0; {@code onFrame} reads the table's version
 * once a packet and its parts again only when a newer version was loaded
 * (the runtime replaces them between two invocations), so that a packet
 * sees one version of the table.
 */
public class Router {
    static int[] trie;
    static int[] base;
    static int[] pre;
    static int[] hops;
    static int nhBits;
    /** The version of table 0 that {@code trie} to {@code nhBits} hold (0:
     * none yet; the runtime counts loads from 1). */
    static int version;

    /** Ports an adapter has at most (local slots: the engine's port ids). */
    static final int PORTS = 8;
    /** Port slots: the local ones, then as many of other adapters. */
    static final int SLOTS = 2 * PORTS;
    /** Next hops the host may configure. */
    static final int NEXT_HOPS = 4096;

    /** To the host: an IPv4 packet for one of the ports' addresses (or
     * broadcast or multicast). */
    static final int HOST_FOR_ME = 1;
    /** To the host: the TTL would expire. */
    static final int HOST_TTL = 2;
    /** To the host: no route. */
    static final int HOST_NO_ROUTE = 3;
    /** To the host: the route's next hop has no MAC configured (or its
     * port no address). */
    static final int HOST_NO_NEIGHBOUR = 4;
    /** To the host: a header with options. */
    static final int HOST_OPTIONS = 5;
    /** To the host: neither IPv4 nor ARP. */
    static final int HOST_OTHER = 6;
    /** To the host: ARP that is not a request for a port's address. */
    static final int HOST_ARP = 7;

    /** Counter: frames forwarded. */
    static final int C_FORWARDED = 0;
    /** Counter: ARP requests answered. */
    static final int C_ARP_ANSWERED = 1;
    /** Counter: frames handed to the host. */
    static final int C_TO_HOST = 2;
    /** Counter: frames the host sent out. */
    static final int C_FROM_HOST = 3;
    /** Drop: shorter than an Ethernet header, or not a bulk message. */
    static final int D_SHORT_FRAME = 4;
    /** Drop: shorter than an IPv4 header (or an ARP packet). */
    static final int D_SHORT_HEADER = 5;
    /** Drop: IP version not 4. */
    static final int D_VERSION = 6;
    /** Drop: header length below 5 words. */
    static final int D_HEADER_LENGTH = 7;
    /** Drop: bad header checksum. */
    static final int D_CHECKSUM = 8;
    /** Drop: total length below the header or past the frame. */
    static final int D_LENGTH = 9;
    /** Drop: ARP of another hardware or protocol. */
    static final int D_BAD_ARP = 10;
    /** Drop: an ARP request for an address not the port's. */
    static final int D_ARP_NOT_MINE = 11;
    /** Drop: a unicast frame for another MAC. */
    static final int D_OTHER_MAC = 12;
    /** Drop: the ingress port is not configured. */
    static final int D_UNCONFIGURED = 13;
    /** Drop: the runtime refused the send (egress full or gone). */
    static final int D_SEND_REFUSED = 14;
    /** Drop: a bad configuration or host send (or one from another
     * endpoint than the host application's). */
    static final int D_BAD_CONFIG = 15;
    /** Drop: for the host, but no host endpoint configured yet. */
    static final int D_NO_HOST = 16;
    /** Counter: frames routed to another adapter's port and handed to it
     * (counted in {@link #C_FORWARDED} too). */
    static final int C_HANDED = 17;
    /** Counters. */
    static final int COUNTERS = 18;

    static int[] counts;
    static int[] portAddr;
    static byte[] portMac;
    static boolean[] portUp;
    /** For a remote slot: the owning adapter's destination and port id. */
    static int[] portDest;
    static int[] portRemote;
    /** The configured ports' addresses, {@code owns} of them. */
    static int[] own;
    static int owns;
    static int[] nhPort;
    static byte[] nhMac;
    static boolean[] nhUp;
    static int host;
    static boolean hostSet;
    static int self;
    static byte[] hdr;
    static byte[] args;
    static byte[] none;

    static void init(int first) {
        counts = new int[COUNTERS];
        portAddr = new int[SLOTS];
        portMac = new byte[SLOTS * 6];
        portUp = new boolean[SLOTS];
        portDest = new int[SLOTS];
        portRemote = new int[SLOTS];
        own = new int[SLOTS];
        nhPort = new int[NEXT_HOPS];
        nhMac = new byte[NEXT_HOPS * 6];
        nhUp = new boolean[NEXT_HOPS];
        hdr = new byte[64];
        args = new byte[Spine.ARGS_MAX];
        none = new byte[0];
        self = first & 0xFFFF;
        Spine.addHandler("onFrame", self, 0);
        Spine.addHandler("onConfig", self + 1, 0);
        Spine.addHandler("onHostSend", self + 2, 0);
        Spine.addHandler("onStats", self + 3, 0);
    }

    static int u8(int at) {
        return hdr[at] & 0xff;
    }

    static int u16(int at) {
        return ((hdr[at] & 0xff) << 8) | (hdr[at + 1] & 0xff);
    }

    static int u32(int at) {
        return (u16(at) << 16) | u16(at + 2);
    }

    static void put32(int at, int v) {
        hdr[at] = (byte) (v >>> 24);
        hdr[at + 1] = (byte) (v >>> 16);
        hdr[at + 2] = (byte) (v >>> 8);
        hdr[at + 3] = (byte) v;
    }

    /** Copy MAC {@code k} of {@code macs} into {@code hdr} at {@code at}. */
    static void putMac(byte[] macs, int k, int at) {
        for (int i = 0; i < 6; i++) {
            hdr[at + i] = macs[6 * k + i];
        }
    }

    /** Hand the frame to the host with {@code why} and its port. */
    static void toHost(int why, int port, int buf) {
        if (!hostSet) {
            counts[D_NO_HOST]++;
            return;
        }
        args[0] = (byte) why;
        args[1] = (byte) port;
        if (Spine.sendBulk(host, self, args, 0, 2, buf) == 0) {
            counts[C_TO_HOST]++;
        } else {
            counts[D_SEND_REFUSED]++;
        }
    }

    /*
     * onFrame is the per-packet path: it reads the header through a local
     * copy of hdr and spells out its 16- and 32-bit reads and the MAC
     * copies, where the colder handlers call u16, u32 and putMac, so that
     * the compiled code checks the array once and calls nothing per field.
     */
    static void onFrame(int unused, int msg) {
        int buf = Spine.bulk(msg);
        int port = Spine.source(msg) & 0xFFFFFF;
        if (buf < 0) {
            counts[D_SHORT_FRAME]++;
            return;
        }
        int len = Spine.bufferLength(buf);
        byte[] h = hdr;
        int n = Spine.readBuffer(buf, 0, h, 0, 42);
        if (n < 14) {
            counts[D_SHORT_FRAME]++;
            return;
        }
        if (port >= PORTS || !portUp[port]) {
            counts[D_UNCONFIGURED]++;
            return;
        }
        byte[] pmacs = portMac;
        if ((h[0] & 1) == 0) {
            for (int i = 0; i < 6; i++) {
                if (h[i] != pmacs[6 * port + i]) {
                    counts[D_OTHER_MAC]++;
                    return;
                }
            }
        }
        int type = ((h[12] & 0xff) << 8) | (h[13] & 0xff);
        if (type == 0x0806) {
            arp(port, buf, n);
            return;
        }
        if (type != 0x0800) {
            toHost(HOST_OTHER, port, buf);
            return;
        }
        if (n < 34) {
            counts[D_SHORT_HEADER]++;
            return;
        }
        int vihl = h[14] & 0xff;
        if ((vihl >>> 4) != 4) {
            counts[D_VERSION]++;
            return;
        }
        if ((vihl & 15) < 5) {
            counts[D_HEADER_LENGTH]++;
            return;
        }
        if ((vihl & 15) > 5) {
            toHost(HOST_OPTIONS, port, buf);
            return;
        }
        // The header's ten 16-bit words, summed in ones' complement.
        int sum = 0;
        for (int i = 14; i < 34; i += 2) {
            sum += ((h[i] & 0xff) << 8) | (h[i + 1] & 0xff);
        }
        sum = (sum & 0xffff) + (sum >>> 16);
        sum = (sum & 0xffff) + (sum >>> 16);
        if (sum != 0xffff) {
            counts[D_CHECKSUM]++;
            return;
        }
        int total = ((h[16] & 0xff) << 8) | (h[17] & 0xff);
        if (total < 20 || total > len - 14) {
            counts[D_LENGTH]++;
            return;
        }
        int dst = ((h[30] & 0xff) << 24) | ((h[31] & 0xff) << 16)
                | ((h[32] & 0xff) << 8) | (h[33] & 0xff);
        if ((dst >>> 28) >= 14) {
            toHost(HOST_FOR_ME, port, buf);
            return;
        }
        for (int p = 0; p < owns; p++) {
            if (own[p] == dst) {
                toHost(HOST_FOR_ME, port, buf);
                return;
            }
        }
        int ttl = h[22] & 0xff;
        if (ttl <= 1) {
            toHost(HOST_TTL, port, buf);
            return;
        }
        int[] meta = Spine.table(0, Spine.TABLE_META);
        if (meta == null) {
            toHost(HOST_NO_ROUTE, port, buf);
            return;
        }
        if (meta[1] != version) {
            trie = Spine.table(0, Spine.TABLE_TRIE);
            base = Spine.table(0, Spine.TABLE_BASE);
            pre = Spine.table(0, Spine.TABLE_PRE);
            hops = Spine.table(0, Spine.TABLE_HOPS);
            nhBits = meta[0];
            version = meta[1];
        }
        int nh = lookup(dst);
        if (nh < 0) {
            toHost(HOST_NO_ROUTE, port, buf);
            return;
        }
        if (nh >= NEXT_HOPS || !nhUp[nh] || !portUp[nhPort[nh]]) {
            toHost(HOST_NO_NEIGHBOUR, port, buf);
            return;
        }
        int out = nhPort[nh];
        // RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'), m the TTL's word.
        int m = (ttl << 8) | (h[23] & 0xff);
        int m2 = m - 0x100;
        int hc = (~(((h[24] & 0xff) << 8) | (h[25] & 0xff)) & 0xffff) + (~m & 0xffff) + m2;
        hc = (hc & 0xffff) + (hc >>> 16);
        hc = (hc & 0xffff) + (hc >>> 16);
        hc = ~hc & 0xffff;
        h[22] = (byte) (ttl - 1);
        h[24] = (byte) (hc >>> 8);
        h[25] = (byte) hc;
        // The next hop's MAC as destination, the egress port's as source.
        byte[] nmacs = nhMac;
        int a = 6 * nh;
        int b = 6 * out;
        for (int i = 0; i < 6; i++) {
            h[i] = nmacs[a + i];
            h[6 + i] = pmacs[b + i];
        }
        Spine.writeBuffer(buf, 0, h, 0, 26);
        if (out >= PORTS) {
            handOver(out, buf);
        } else if (Spine.sendBulk((Spine.DEST_PORT << 24) | out, 0, none, 0, 0, buf) == 0) {
            counts[C_FORWARDED]++;
        } else {
            counts[D_SEND_REFUSED]++;
        }
    }

    /** Hand a routed frame to the adapter that owns remote slot {@code out}. */
    static void handOver(int out, int buf) {
        int p = portRemote[out];
        args[0] = (byte) p;
        args[1] = (byte) (p >> 8);
        args[2] = (byte) (p >> 16);
        args[3] = (byte) (p >> 24);
        if (Spine.sendBulk(portDest[out], Spine.PORT_OUT, args, 0, 4, buf) == 0) {
            counts[C_FORWARDED]++;
            counts[C_HANDED]++;
        } else {
            counts[D_SEND_REFUSED]++;
        }
    }

    /** An ARP frame ({@code n} bytes of it in {@code hdr}) on {@code port}. */
    static void arp(int port, int buf, int n) {
        if (n < 42) {
            counts[D_SHORT_HEADER]++;
            return;
        }
        if (u16(14) != 1 || u16(16) != 0x0800 || u8(18) != 6 || u8(19) != 4) {
            counts[D_BAD_ARP]++;
            return;
        }
        if (u16(20) != 1) {
            toHost(HOST_ARP, port, buf);
            return;
        }
        if (u32(38) != portAddr[port]) {
            counts[D_ARP_NOT_MINE]++;
            return;
        }
        // The reply, in place: to the asker, from the port.
        int asker = u32(28);
        for (int i = 0; i < 6; i++) {
            hdr[i] = hdr[22 + i];
            hdr[32 + i] = hdr[22 + i];
        }
        putMac(portMac, port, 6);
        putMac(portMac, port, 22);
        hdr[21] = 2;
        put32(28, portAddr[port]);
        put32(38, asker);
        Spine.writeBuffer(buf, 0, hdr, 0, 42);
        if (Spine.sendBulk((Spine.DEST_PORT << 24) | port, 0, none, 0, 0, buf) == 0) {
            counts[C_ARP_ANSWERED]++;
        } else {
            counts[D_SEND_REFUSED]++;
        }
    }

    static void onConfig(int unused, int msg) {
        int n = Spine.readArgs(msg, 0, args, 0, Spine.ARGS_MAX);
        int from = Spine.source(msg);
        if (n < 18 || (hostSet && from != host)) {
            counts[D_BAD_CONFIG]++;
            return;
        }
        int op = Spine.argInt(msg, 0);
        int k = Spine.argInt(msg, 4);
        int v = Spine.argInt(msg, 8);
        if (op == 1 && k >= 0 && k < PORTS) {
            portAddr[k] = v;
            for (int i = 0; i < 6; i++) {
                portMac[6 * k + i] = args[12 + i];
            }
            portUp[k] = true;
        } else if (op == 2 && k >= 0 && k < NEXT_HOPS && v >= 0 && v < SLOTS) {
            nhPort[k] = v;
            for (int i = 0; i < 6; i++) {
                nhMac[6 * k + i] = args[12 + i];
            }
            nhUp[k] = true;
        } else if (op == 4 && k >= PORTS && k < SLOTS && n >= 26 && remote(msg)) {
            portAddr[k] = v;
            for (int i = 0; i < 6; i++) {
                portMac[6 * k + i] = args[12 + i];
            }
            portDest[k] = Spine.argInt(msg, 18);
            portRemote[k] = Spine.argInt(msg, 22);
            portUp[k] = true;
        } else if (op != 3) {
            counts[D_BAD_CONFIG]++;
            return;
        }
        owns = 0;
        for (int s = 0; s < SLOTS; s++) {
            if (portUp[s]) {
                own[owns++] = portAddr[s];
            }
        }
        host = from;
        hostSet = true;
        Spine.reply(msg, self + 1, args, 0, 4);
    }

    /** Whether configuration {@code msg}'s remote port names a peer queue or
     * wire link and a port id an adapter may have. */
    static boolean remote(int msg) {
        int kind = Spine.argInt(msg, 18) >>> 24;
        int p = Spine.argInt(msg, 22);
        return (kind == Spine.DEST_PEER || kind == Spine.DEST_WIRE) && p >= 0 && p < PORTS;
    }

    static void onHostSend(int unused, int msg) {
        int buf = Spine.bulk(msg);
        if (buf < 0 || Spine.argsLength(msg) < 4 || !hostSet || Spine.source(msg) != host) {
            counts[D_BAD_CONFIG]++;
            return;
        }
        int port = Spine.argInt(msg, 0);
        if (port < 0 || port >= PORTS || !portUp[port]) {
            counts[D_BAD_CONFIG]++;
            return;
        }
        if (Spine.sendBulk((Spine.DEST_PORT << 24) | port, 0, none, 0, 0, buf) == 0) {
            counts[C_FROM_HOST]++;
        } else {
            counts[D_SEND_REFUSED]++;
        }
    }

    static void onStats(int unused, int msg) {
        for (int i = 0; i < COUNTERS; i++) {
            int v = counts[i];
            args[4 * i] = (byte) v;
            args[4 * i + 1] = (byte) (v >> 8);
            args[4 * i + 2] = (byte) (v >> 16);
            args[4 * i + 3] = (byte) (v >> 24);
        }
        Spine.reply(msg, self + 3, args, 0, 4 * COUNTERS);
    }

    /**
     * The sum (wrapping) of {@link #lookup}'s answers for every address of
     * {@code addrs}: the lookup's cost without a host call per address, as
     * a handler calling it sees.
     */
    static int lookupAll(int[] addrs) {
        int sum = 0;
        for (int i = 0; i < addrs.length; i++) {
            sum += lookup(addrs[i]);
        }
        return sum;
    }

    /** The next hop of the longest prefix matching {@code addr}, or -1. */
    static int lookup(int addr) {
        int[] t = trie;
        if (t.length == 0) {
            return -1;
        }
        int node = t[0];
        int pos = (node >>> 22) & 31;
        int kind = node >>> 27;
        while (kind <= 22) {
            node = t[(node & 0x3fffff) + ((addr << pos) >>> (32 - kind))];
            pos += kind + ((node >>> 22) & 31);
            kind = node >>> 27;
        }
        if (kind == 23) {
            int a = node & 0x3fffff;
            return a == 0 ? -1 : hops[a - 1];
        }
        int at = 2 * ((node & 0x3fffff) + ((addr << pos) >>> 1 >>> kind));
        int diff = addr ^ base[at];
        int info = base[at + 1];
        int nhMask = (1 << nhBits) - 1;
        while (true) {
            int len = info >>> 26;
            if (len == 0 || (diff >>> (32 - len)) == 0) {
                return hops[info & nhMask];
            }
            int up = (info & 0x3ffffff) >>> nhBits;
            if (up == 0) {
                return -1;
            }
            info = pre[up - 1];
        }
    }
}
