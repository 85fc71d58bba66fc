// Small whole programs mixing the subset's features; results computed
// independently (prime counts, CRC-32 as zlib computes it, Collatz steps).
//
// expect: primes 10000 => 1229
// expect: primes 2 => 1
// expect: primes 1 => 0
// expect: gcd 1071 462 => 21
// expect: gcd -48 18 => 6
// expect: isqrt 2147395600 => 46340
// expect: isqrt 2147483647 => 46340
// expect: isqrt 0 => 0
// expect: popcount -1 => 32
// expect: popcount 1431655765 => 16
// expect: crc32 256 => 688229491
// expect: crc32 0 => 0
// expect: collatz 27 => 111
// expect: sortShorts 500 => 1
// expect: reverseBits 1 => -2147483648
// expect: reverseBits 6 => 1610612736
public class Programs {
    static short[] shorts;

    // number of primes <= n (sieve of Eratosthenes on a boolean[])
    static int primes(int n) {
        if (n < 2) return 0;
        boolean[] composite = new boolean[n + 1];
        int count = 0;
        for (int i = 2; i <= n; i++) {
            if (!composite[i]) {
                count++;
                for (int j = i * 2; j <= n; j += i) composite[j] = true;
            }
        }
        return count;
    }

    static int gcd(int a, int b) {
        if (a < 0) a = -a;
        if (b < 0) b = -b;
        while (b != 0) {
            int t = a % b;
            a = b;
            b = t;
        }
        return a;
    }

    // floor(sqrt(x)) for x >= 0 by Newton's method, without overflow
    static int isqrt(int x) {
        if (x < 2) return x;
        int r = x / 2;
        int last = 0;
        while (r != last) {
            last = r;
            r = (r + x / r) >>> 1;
            if (r > last) {
                // oscillation between floor and floor + 1
                return last;
            }
        }
        while (r > x / r) r--;
        return r;
    }

    static int popcount(int x) {
        int c = 0;
        while (x != 0) {
            c += x & 1;
            x >>>= 1;
        }
        return c;
    }

    // CRC-32 (polynomial 0xEDB88320, as zlib) of the bytes 0, 1, ..., n-1
    static int crc32(int n) {
        byte[] data = new byte[n];
        for (int i = 0; i < n; i++) data[i] = (byte) i;
        int[] table = new int[256];
        for (int i = 0; i < 256; i++) {
            int c = i;
            for (int k = 0; k < 8; k++) {
                c = (c & 1) != 0 ? 0xEDB88320 ^ (c >>> 1) : c >>> 1;
            }
            table[i] = c;
        }
        int crc = 0xFFFFFFFF;
        for (int i = 0; i < n; i++) {
            crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >>> 8);
        }
        return ~crc;
    }

    static int collatz(int n) {
        int steps = 0;
        while (n != 1) {
            n = (n & 1) == 0 ? n / 2 : 3 * n + 1;
            steps++;
        }
        return steps;
    }

    // insertion sort of n pseudo-random shorts (in a static field); 1 when sorted
    static int sortShorts(int n) {
        shorts = new short[n];
        int seed = 12345;
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245 + 12345;
            shorts[i] = (short) (seed >> 16);
        }
        for (int i = 1; i < n; i++) {
            short v = shorts[i];
            int j = i - 1;
            while (j >= 0 && shorts[j] > v) {
                shorts[j + 1] = shorts[j];
                j--;
            }
            shorts[j + 1] = v;
        }
        for (int i = 1; i < n; i++) {
            if (shorts[i - 1] > shorts[i]) return 0;
        }
        return 1;
    }

    static int reverseBits(int x) {
        int r = 0;
        for (int i = 0; i < 32; i++) {
            r = (r << 1) | (x & 1);
            x >>>= 1;
        }
        return r;
    }
}
