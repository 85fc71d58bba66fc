/**
 * The router extension's route lookup: the LC-trie of Nilsson and Karlsson
 * over flat {@code int} arrays, walked exactly as the Rust
 * {@code unet_router::LcTrie::lookup} walks the same arrays (the host
 * builds the trie and fills these fields; see that module's documentation
 * for the words' layout).
 *
 * <p>{@code trie}: one word a node, {@code kind << 27 | skip << 22 | adr}:
 * an inner node ({@code kind} 1 to 22, its branch) has {@code 2^kind}
 * children at {@code trie[adr]}; a leaf of kind 24 to 31 is a block whose
 * child {@code k}, by the next {@code 31 - kind} bits, names base entry
 * {@code adr + k}; a leaf of kind 23 holds its answer, {@code hops[adr - 1]}
 * (none when {@code adr} is 0).
 * {@code base}: the base vector, each entry's prefix then its
 * {@code len << 26 | (pre + 1) << nhBits | nh} word. {@code pre}: the
 * prefix vector, info words of the same form. {@code hops}: the next hops.
 */
public class LcTrie {
    static int[] trie;
    static int[] base;
    static int[] pre;
    static int[] hops;
    static int nhBits;

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
