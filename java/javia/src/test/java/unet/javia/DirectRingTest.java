package unet.javia;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The direct ring's record format as Javia reads it ({@link DirectPath}),
 * against the golden ring (crates/abi/golden/direct_ring_v1.hex: a ring
 * the Rust side's sends left, described in unet's direct.rs tests): a
 * reader that starts at position 2208 finds a 1500-byte message, padding
 * to the end of the lap, a 400-byte message at the start of the next lap,
 * then a reference (the library's to read), then nothing.
 */
class DirectRingTest {
    static final long START = 2208;

    static MemorySegment ring(Arena arena) throws Exception {
        Path p = Path.of(System.getProperty("unet.root"), "crates", "abi", "golden", "direct_ring_v1.hex");
        assertTrue(Files.isRegularFile(p), "the golden ring at " + p);
        String hex = Files.readString(p, StandardCharsets.US_ASCII).replaceAll("\\s", "");
        MemorySegment m = arena.allocate(hex.length() / 2, 4096);
        for (int i = 0; i < m.byteSize(); i++) {
            m.set(ValueLayout.JAVA_BYTE, i, (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16));
        }
        return m;
    }

    /** Byte {@code j} of golden message {@code i} (as direct.rs makes them). */
    static byte golden(int i, int j) {
        return (byte) (i * 37 + j * 11 + 5);
    }

    @Test
    void theGoldenRingReadsAsTheRustSideWroteIt() throws Exception {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ring = ring(arena);
            assertEquals(4096, ring.byteSize());
            MemorySegment dst = arena.allocate(2048);
            DirectPath p = DirectPath.reader(ring, START);
            assertEquals(1500, p.poll(dst, 0, 2048));
            for (int j = 0; j < 1500; j++) {
                assertEquals(golden(4, j), dst.get(ValueLayout.JAVA_BYTE, j), "byte " + j);
            }
            // The padding is skipped; the next lap's first record lands at an offset.
            assertEquals(400, p.poll(dst, 100, 1948));
            for (int j = 0; j < 400; j++) {
                assertEquals(golden(5, j), dst.get(ValueLayout.JAVA_BYTE, 100 + j), "byte " + j);
            }
            assertEquals(4096 + 416, p.rxPos());
            // A reference is the library's: left where it is, however often asked.
            assertEquals(DirectPath.OTHER, p.poll(dst, 0, 2048));
            assertEquals(DirectPath.OTHER, p.poll(dst, 0, 2048));
            assertEquals(4096 + 416, p.rxPos());
            // Past it: nothing written yet (what is there is an older lap's).
            assertEquals(DirectPath.EMPTY, DirectPath.reader(ring, 4096 + 448).poll(dst, 0, 2048));
            // A position the producer has not reached reads empty too.
            assertEquals(DirectPath.EMPTY, DirectPath.reader(ring, START + 8192).poll(dst, 0, 2048));
        }
    }

    @Test
    void aMessageLargerThanItsReceiveIsLeftForTheLibrary() throws Exception {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ring = ring(arena);
            MemorySegment dst = arena.allocate(2048);
            DirectPath p = DirectPath.reader(ring, START);
            assertEquals(DirectPath.OTHER, p.poll(dst, 0, 1499));
            assertEquals(START, p.rxPos());
            assertEquals(1500, p.poll(dst, 0, 1500));
        }
    }

    @Test
    void hostileHeadersAreLeftForTheLibraryWithoutReadingOutsideTheRing() throws Exception {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dst = arena.allocate(4096);
            // Padding that does not end at the end of the ring.
            MemorySegment ring = ring(arena);
            long padAt = START + 1536;
            long h = ring.get(ValueLayout.JAVA_LONG, padAt);
            ring.set(ValueLayout.JAVA_LONG, padAt, h - (8L << 32));
            DirectPath p = DirectPath.reader(ring, START);
            assertEquals(1500, p.poll(dst, 0, 4096));
            assertEquals(DirectPath.OTHER, p.poll(dst, 0, 4096));
            assertEquals(padAt, p.rxPos());
            // A length that runs past the end of the ring.
            MemorySegment ring2 = ring(arena);
            long h2 = ring2.get(ValueLayout.JAVA_LONG, START);
            ring2.set(ValueLayout.JAVA_LONG, START, (h2 & 0xffff_ffffL) | (4000L << 32));
            DirectPath q = DirectPath.reader(ring2, START);
            assertEquals(DirectPath.OTHER, q.poll(dst, 0, 4096));
            assertEquals(START, q.rxPos());
        }
    }

    @Test
    void aSendThatAnswersTakesTheNextRecordsLinesWithoutMakingARecord() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ring = arena.allocate(4096, 4096);
            MemorySegment src = arena.allocate(64);
            MemorySegment dst = arena.allocate(4096);
            DirectPath p = DirectPath.onRing(ring, 0, 0, 0);
            // Sends with nothing received between them take nothing ahead.
            assertTrue(p.trySend(src, 0, 64));
            assertTrue(p.trySend(src, 0, 64));
            assertEquals(0, ring.get(ValueLayout.JAVA_LONG, 256));
            assertEquals(64, p.poll(dst, 0, 4096));
            assertEquals(64, p.poll(dst, 0, 4096));
            // An answer (records at 0 and 96 read, this one at 192): the
            // line after the next header's (288) is taken for the next
            // 64-byte record, [288, 384); the next header's line is not.
            assertTrue(p.trySend(src, 0, 64));
            assertEquals(DirectPath.tag(320) ^ 0x8000_0000L, ring.get(ValueLayout.JAVA_LONG, 320));
            assertEquals(0, ring.get(ValueLayout.JAVA_LONG, 384));
            assertEquals(64, p.poll(dst, 0, 4096));
            assertEquals(DirectPath.EMPTY, p.poll(dst, 0, 4096));
            // Read from the taken line itself, it is no record either.
            assertEquals(DirectPath.EMPTY, DirectPath.reader(ring, 320).poll(dst, 0, 4096));
            assertEquals(288, p.rxPos());
        }
    }

    @Test
    void linesTheReaderHasNotReadAreNotTakenAhead() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ring = arena.allocate(4096, 4096);
            // The second lap; the reader has read the first lap up to 224,
            // so the writer may write up to 8192 + 224.
            long at = 8192;
            DirectPath p = DirectPath.onRing(ring, at, at, at - 4096 + 224);
            MemorySegment src = arena.allocate(64);
            MemorySegment dst = arena.allocate(4096);
            assertTrue(p.trySend(src, 0, 64));
            assertEquals(64, p.poll(dst, 0, 4096));
            ring.set(ValueLayout.JAVA_LONG, 256, 7);
            // Ends at 8384; the next record's line 8448 (ring offset 256)
            // is past what the reader has freed.
            assertTrue(p.trySend(src, 0, 64));
            assertEquals(7, ring.get(ValueLayout.JAVA_LONG, 256));
            assertEquals(64, p.poll(dst, 0, 4096));
            // And a third does not fit.
            assertEquals(false, p.trySend(src, 0, 64));
        }
    }

    @Test
    void tagsAndSpansFollowTheLayout() {
        assertEquals(1, DirectPath.tag(0));
        assertEquals(513, DirectPath.tag(4096));
        assertEquals(0, DirectPath.tag((0xffff_ffffL) << 3), "the tag wraps at 32 bits");
        assertEquals(32, DirectPath.span(0));
        assertEquals(32, DirectPath.span(24));
        assertEquals(64, DirectPath.span(25));
        assertEquals(416, DirectPath.span(400));
    }
}
