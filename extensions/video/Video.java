import unet.spine.Spine;

/**
 * SPINE's video extension (the SPINE paper, section 5.1): rows of video
 * frames arriving from the network are placed straight into a framebuffer
 * (framebuffer 0 of this extension, which the host application made) at
 * the place of the window that shows their stream; the host application
 * creates, moves and resizes windows and does nothing per frame.
 *
 * <p>Handlers, installed by {@code init(base)}:
 * <ul>
 * <li>{@code onRow} ({@code base}): a row packet, a bulk message whose
 * arguments are {@code [stream, frame, row]} (little-endian ints) and
 * whose bulk data are the row's pixels, 4 bytes each: exactly the width
 * of the window's place for that frame.
 * <li>{@code onConfig} ({@code base + 1}): from the host application's
 * endpoint only (the first to configure the extension; anything from
 * another is dropped as {@link #G_BAD_CONFIG}). {@code [0]} claims the
 * extension; {@code [1, win, stream, x, y, w, h, source]} shows
 * {@code stream} in window {@code win} (0 to {@link #WINDOWS} - 1) at
 * {@code (x, y)}, {@code w} by {@code h} pixels, taking rows only from
 * {@code source} (a destination as {@code Spine.source} gives it: the
 * sender's link or endpoint), and bumps the window's version: a new
 * window, a move or a resize; {@code [2, win]} closes window {@code win}.
 * A window lies inside the framebuffer, is at most {@link #MAX_SIDE}
 * pixels a side, shows a stream no other window shows and overlaps no
 * other window's place (configured, in use for a frame, or being
 * cleared). Each is answered with {@code [op, status]}: 0 done, 1
 * refused (counted, nothing changed). Closing a window leaves its last
 * frame's pixels where they are (the host may draw over them).
 * <li>{@code onStats} ({@code base + 2}): from anyone; {@code [win]} or
 * nothing. Answers the asker's own source (what a window's
 * {@code source} is set to for rows from it), the counters not of a
 * window ({@link #G_NO_WINDOW} ...), then, for {@code win}: its stream,
 * place {@code (x, y, w, h)}, version, the frame in progress (-1 before
 * the first) and the rows of it written, and its counters
 * ({@link #W_COMPLETED} ...), all little-endian ints.
 * </ul>
 *
 * <p><b>No tearing after a move.</b> The paper's prototype drew lines of
 * image data at a window's old place for a moment after the window moved,
 * because the move and the data were not synchronised. Here each frame is
 * placed whole at one place: the window's place (position and size) is
 * read once, when the frame's first row arrives, and every row of that
 * frame goes there, whatever configuration arrives meanwhile. A move or
 * resize therefore takes effect at the next frame: the frame in progress
 * is finished at the place it started (no frame is split between two
 * places), and no row of a later frame lands at the old place. A row of
 * an earlier frame than the one in progress is dropped ({@link #W_LATE}):
 * written now it would tear the frame in progress, or land at a place no
 * longer the window's.
 *
 * <p>The old place is cleared: when a frame starts at a place other than
 * its predecessor's, the predecessor's place (minus what the new place
 * covers) becomes the window's stale area, and each row of the new frame
 * clears, before it is written, its share of the stale area's rows
 * ({@code ceil(stale rows / rows)} a row, with {@code Spine.fbFill}), so
 * that the work is spread over the frame and, when the frame completes,
 * no pixel of the stream is left outside its place. A stale area that a
 * further move finds not yet cleared is cleared at once. Windows may not
 * overlap one another's places, so clearing one never touches another.
 *
 * <p>Frames, per window: a frame is complete when each of its rows has
 * been written once ({@link #W_COMPLETED}); lost ({@link #W_LOST}) when
 * its number was skipped, or when it was incomplete as the next began.
 *
 * <p>Hostile rows are dropped and counted, never written: a stream no
 * window shows ({@link #G_NO_WINDOW}), arguments too short
 * ({@link #G_BAD_ARGS}); for a window: a sender that is not the stream's
 * configured source ({@link #W_BAD_SOURCE}), a frame before the one in
 * progress ({@link #W_LATE}) or too far after it ({@link #W_FAR_AHEAD}),
 * a row outside the frame's place ({@link #W_BAD_ROW}), pixels of
 * another length than its width, or none ({@link #W_BAD_LENGTH}), a row
 * already written for the frame ({@link #W_DUPLICATE}), and a write the
 * runtime refused ({@link #W_FB_REFUSED}: none is expected, the place is
 * checked against the framebuffer). The runtime checks every write
 * against the framebuffer too: nothing is written outside it.
 */
public class Video {
    /** The framebuffer the windows are on. */
    static final int FB = 0;
    /** Windows at most. */
    static final int WINDOWS = 16;
    /** Pixels a side of a window at most. */
    static final int MAX_SIDE = 4096;
    /** Words of a window's bitmap of rows written. */
    static final int ROW_WORDS = MAX_SIDE / 32;
    /** Frames a row may be ahead of the frame in progress. */
    static final int MAX_AHEAD = 1 << 16;

    /** Counter, not of a window: rows of a stream no window shows. */
    static final int G_NO_WINDOW = 0;
    /** Counter: row packets with arguments shorter than 12 bytes. */
    static final int G_BAD_ARGS = 1;
    /** Counter: configurations refused, or from another endpoint. */
    static final int G_BAD_CONFIG = 2;
    /** Counters not of a window. */
    static final int G_COUNTERS = 3;

    /** Counter of a window: frames completed. */
    static final int W_COMPLETED = 0;
    /** Counter: frames lost (skipped, or incomplete when the next began). */
    static final int W_LOST = 1;
    /** Drop: a row of a frame before the one in progress. */
    static final int W_LATE = 2;
    /** Drop: a row of a frame too far after the one in progress. */
    static final int W_FAR_AHEAD = 3;
    /** Drop: a row outside the frame's place. */
    static final int W_BAD_ROW = 4;
    /** Drop: no pixels, or not the width of the frame's place. */
    static final int W_BAD_LENGTH = 5;
    /** Drop: a row already written for this frame. */
    static final int W_DUPLICATE = 6;
    /** Drop: not from the stream's configured source. */
    static final int W_BAD_SOURCE = 7;
    /** Drop: the runtime refused the write. */
    static final int W_FB_REFUSED = 8;
    /** Counters of a window. */
    static final int W_COUNTERS = 9;

    static int[] global;
    static int[] counts;
    /** Configured: whether shown, stream, place, version, source. */
    static boolean[] shown;
    static int[] stream;
    static int[] cx;
    static int[] cy;
    static int[] cw;
    static int[] ch;
    static int[] version;
    static int[] source;
    /** The frame in progress and the place read at its first row. */
    static boolean[] started;
    static int[] frame;
    static int[] fx;
    static int[] fy;
    static int[] fw;
    static int[] fh;
    static int[] fversion;
    static int[] rows;
    static int[] seen;
    /** The stale area: the previous frame's place, rows not yet cleared
     * from {@code snext} up. */
    static boolean[] stale;
    static int[] sx;
    static int[] sy;
    static int[] sw;
    static int[] sh;
    static int[] snext;
    static int[] sper;
    static int fbWidth;
    static int fbHeight;
    static int host;
    static boolean hostSet;
    static byte[] out;

    static void init(int base) {
        global = new int[G_COUNTERS];
        counts = new int[WINDOWS * W_COUNTERS];
        shown = new boolean[WINDOWS];
        stream = new int[WINDOWS];
        cx = new int[WINDOWS];
        cy = new int[WINDOWS];
        cw = new int[WINDOWS];
        ch = new int[WINDOWS];
        version = new int[WINDOWS];
        source = new int[WINDOWS];
        started = new boolean[WINDOWS];
        frame = new int[WINDOWS];
        fx = new int[WINDOWS];
        fy = new int[WINDOWS];
        fw = new int[WINDOWS];
        fh = new int[WINDOWS];
        fversion = new int[WINDOWS];
        rows = new int[WINDOWS];
        seen = new int[WINDOWS * ROW_WORDS];
        stale = new boolean[WINDOWS];
        sx = new int[WINDOWS];
        sy = new int[WINDOWS];
        sw = new int[WINDOWS];
        sh = new int[WINDOWS];
        snext = new int[WINDOWS];
        sper = new int[WINDOWS];
        out = new byte[Spine.ARGS_MAX];
        Spine.addHandler("onRow", base, base);
        Spine.addHandler("onConfig", base + 1, base + 1);
        Spine.addHandler("onStats", base + 2, base + 2);
    }

    static int min(int a, int b) {
        return a < b ? a : b;
    }

    static int max(int a, int b) {
        return a > b ? a : b;
    }

    static void put(int at, int v) {
        out[at] = (byte) v;
        out[at + 1] = (byte) (v >> 8);
        out[at + 2] = (byte) (v >> 16);
        out[at + 3] = (byte) (v >> 24);
    }

    /** The window showing stream {@code s}, or -1. */
    static int windowOf(int s) {
        for (int i = 0; i < WINDOWS; i++) {
            if (shown[i] && stream[i] == s) {
                return i;
            }
        }
        return -1;
    }

    static void drop(int win, int why) {
        counts[win * W_COUNTERS + why]++;
    }

    static void onRow(int self, int msg) {
        if (Spine.argsLength(msg) < 12) {
            global[G_BAD_ARGS]++;
            return;
        }
        int s = Spine.argInt(msg, 0);
        int f = Spine.argInt(msg, 4);
        int r = Spine.argInt(msg, 8);
        int win = windowOf(s);
        if (win < 0) {
            global[G_NO_WINDOW]++;
            return;
        }
        if (Spine.source(msg) != source[win]) {
            drop(win, W_BAD_SOURCE);
            return;
        }
        boolean next = !started[win];
        if (!next) {
            int d = f - frame[win];
            if (d < 0) {
                drop(win, W_LATE);
                return;
            }
            if (d > MAX_AHEAD) {
                drop(win, W_FAR_AHEAD);
                return;
            }
            next = d > 0;
        }
        // The place this row's frame has: read now for a new frame.
        int w = next ? cw[win] : fw[win];
        int h = next ? ch[win] : fh[win];
        if (r < 0 || r >= h) {
            drop(win, W_BAD_ROW);
            return;
        }
        int buf = Spine.bulk(msg);
        if (buf < 0 || Spine.bufferLength(buf) != w * 4) {
            drop(win, W_BAD_LENGTH);
            return;
        }
        if (next) {
            startFrame(win, f);
        }
        int word = win * ROW_WORDS + (r >> 5);
        int bit = 1 << (r & 31);
        if ((seen[word] & bit) != 0) {
            drop(win, W_DUPLICATE);
            return;
        }
        clearSome(win, sper[win]);
        int at = ((fy[win] + r) * fbWidth + fx[win]) * 4;
        if (Spine.fbWrite(FB, at, buf, 0, w * 4) != w * 4) {
            drop(win, W_FB_REFUSED);
            return;
        }
        seen[word] |= bit;
        rows[win]++;
        if (rows[win] == fh[win]) {
            counts[win * W_COUNTERS + W_COMPLETED]++;
            clearSome(win, sh[win]);
        }
    }

    /** Frame {@code f} starts in window {@code win}: the frame in
     * progress is over (lost if incomplete, as are skipped numbers), and
     * the window's place is read for the new one. */
    static void startFrame(int win, int f) {
        if (started[win]) {
            if (rows[win] < fh[win]) {
                counts[win * W_COUNTERS + W_LOST]++;
            }
            counts[win * W_COUNTERS + W_LOST] += f - frame[win] - 1;
            if (cx[win] != fx[win] || cy[win] != fy[win] || cw[win] != fw[win]
                    || ch[win] != fh[win]) {
                // A stale area a further move finds: cleared at once.
                clearSome(win, sh[win]);
                stale[win] = true;
                sx[win] = fx[win];
                sy[win] = fy[win];
                sw[win] = fw[win];
                sh[win] = fh[win];
                snext[win] = 0;
            }
        }
        started[win] = true;
        frame[win] = f;
        fx[win] = cx[win];
        fy[win] = cy[win];
        fw[win] = cw[win];
        fh[win] = ch[win];
        fversion[win] = version[win];
        rows[win] = 0;
        sper[win] = stale[win] ? (sh[win] - snext[win] + fh[win] - 1) / fh[win] : 0;
        int words = (fh[win] + 31) >> 5;
        for (int i = 0; i < words; i++) {
            seen[win * ROW_WORDS + i] = 0;
        }
    }

    /** Clear up to {@code n} rows of window {@code win}'s stale area
     * (the parts the frame's place does not cover). */
    static void clearSome(int win, int n) {
        if (!stale[win]) {
            return;
        }
        while (n > 0 && snext[win] < sh[win]) {
            int y = sy[win] + snext[win];
            int a = sx[win];
            int b = sx[win] + sw[win];
            if (y >= fy[win] && y < fy[win] + fh[win]) {
                fill(y, a, min(b, fx[win]));
                fill(y, max(a, fx[win] + fw[win]), b);
            } else {
                fill(y, a, b);
            }
            snext[win]++;
            n--;
        }
        if (snext[win] >= sh[win]) {
            stale[win] = false;
            sper[win] = 0;
        }
    }

    static void fill(int y, int from, int to) {
        if (to > from) {
            Spine.fbFill(FB, (y * fbWidth + from) * 4, (to - from) * 4, 0);
        }
    }

    /** Whether rectangles {@code (x, y, w, h)} and {@code (x2, y2, w2,
     * h2)} overlap. */
    static boolean overlap(int x, int y, int w, int h, int x2, int y2, int w2, int h2) {
        return x < x2 + w2 && x2 < x + w && y < y2 + h2 && y2 < y + h;
    }

    /** Whether place {@code (x, y, w, h)} for window {@code win} overlaps
     * another window's place: configured, of its frame in progress, or
     * stale. */
    static boolean taken(int win, int x, int y, int w, int h) {
        for (int i = 0; i < WINDOWS; i++) {
            if (i == win) {
                continue;
            }
            if (shown[i] && overlap(x, y, w, h, cx[i], cy[i], cw[i], ch[i])) {
                return true;
            }
            if (started[i] && overlap(x, y, w, h, fx[i], fy[i], fw[i], fh[i])) {
                return true;
            }
            if (stale[i] && overlap(x, y, w, h, sx[i], sy[i], sw[i], sh[i])) {
                return true;
            }
        }
        return false;
    }

    static void onConfig(int self, int msg) {
        int from = Spine.source(msg);
        if (!hostSet) {
            host = from;
            hostSet = true;
        }
        if (from != host) {
            global[G_BAD_CONFIG]++;
            return;
        }
        int n = Spine.argsLength(msg);
        int op = n >= 4 ? Spine.argInt(msg, 0) : -1;
        int status = 1;
        if (op == 0) {
            status = 0;
        } else if (op == 1 && n >= 32) {
            status = place(msg) ? 0 : 1;
        } else if (op == 2 && n >= 8) {
            int win = Spine.argInt(msg, 4);
            if (win >= 0 && win < WINDOWS && shown[win]) {
                shown[win] = false;
                started[win] = false;
                clearSome(win, sh[win]);
                version[win]++;
                status = 0;
            }
        }
        if (status != 0) {
            global[G_BAD_CONFIG]++;
        }
        put(0, op);
        put(4, status);
        Spine.reply(msg, self, out, 0, 8);
    }

    /** {@code [1, win, stream, x, y, w, h, source]}: whether done. */
    static boolean place(int msg) {
        int win = Spine.argInt(msg, 4);
        int s = Spine.argInt(msg, 8);
        int x = Spine.argInt(msg, 12);
        int y = Spine.argInt(msg, 16);
        int w = Spine.argInt(msg, 20);
        int h = Spine.argInt(msg, 24);
        // The framebuffer may have been made after the claim; its size
        // never changes once made.
        fbWidth = Spine.fbWidth(FB);
        fbHeight = Spine.fbHeight(FB);
        if (win < 0 || win >= WINDOWS || fbWidth <= 0 || fbHeight <= 0) {
            return false;
        }
        if (w <= 0 || h <= 0 || w > MAX_SIDE || h > MAX_SIDE || x < 0 || y < 0
                || x > fbWidth - w || y > fbHeight - h) {
            return false;
        }
        int other = windowOf(s);
        if ((other >= 0 && other != win) || taken(win, x, y, w, h)) {
            return false;
        }
        if (!shown[win] || stream[win] != s) {
            // Another stream: its frames start afresh.
            started[win] = false;
            for (int i = 0; i < W_COUNTERS; i++) {
                counts[win * W_COUNTERS + i] = 0;
            }
        }
        shown[win] = true;
        stream[win] = s;
        cx[win] = x;
        cy[win] = y;
        cw[win] = w;
        ch[win] = h;
        source[win] = Spine.argInt(msg, 28);
        version[win]++;
        return true;
    }

    static void onStats(int self, int msg) {
        put(0, Spine.source(msg));
        for (int i = 0; i < G_COUNTERS; i++) {
            put(4 + 4 * i, global[i]);
        }
        int at = 4 + 4 * G_COUNTERS;
        if (Spine.argsLength(msg) >= 4) {
            int win = Spine.argInt(msg, 0);
            if (win >= 0 && win < WINDOWS) {
                put(at, stream[win]);
                put(at + 4, cx[win]);
                put(at + 8, cy[win]);
                put(at + 12, cw[win]);
                put(at + 16, ch[win]);
                put(at + 20, version[win]);
                put(at + 24, started[win] ? frame[win] : -1);
                put(at + 28, started[win] ? rows[win] : 0);
                at += 32;
                for (int i = 0; i < W_COUNTERS; i++) {
                    put(at + 4 * i, counts[win * W_COUNTERS + i]);
                }
                at += 4 * W_COUNTERS;
            }
        }
        Spine.reply(msg, self, out, 0, at);
    }
}
