package unet.javia;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.MemoryLayout.PathElement.sequenceElement;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_SHORT_UNALIGNED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The golden layout vector (crates/abi/golden/endpoint_v1.hex, the bytes
 * of a small endpoint segment the Rust layout builds) read through Java's
 * own description of the shared-memory layout: the endpoint header, the
 * ring headers and the send, receive and event descriptors, as a Java
 * program that reads unet's shared memory would declare them. The values
 * are those the Rust side lists (unet_abi::golden::GOLDEN_FACTS).
 */
class GoldenVectorTest {
    static final ValueLayout.OfLong U64 = JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt U32 = JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfShort U16 = JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** {@code EndpointHeader}, its first 0x70 bytes. */
    static final StructLayout HEADER = MemoryLayout.structLayout(
            U64.withName("magic"), U32.withName("version"), U32.withName("header_size"),
            U64.withName("segment_size"), U32.withName("endpoint_id"), U32.withName("flags"),
            U32.withName("buffer_size"), U32.withName("send_cap"), U32.withName("recv_cap"),
            U32.withName("free_cap"), U32.withName("event_cap"), U32.withName("reserved0"),
            U64.withName("send_off"), U64.withName("recv_off"), U64.withName("free_off"),
            U64.withName("event_off"), U64.withName("buffer_area_off"), U64.withName("buffer_area_size"),
            U64.withName("engine_id"));

    /** {@code RingHeader}: head and tail on lines of their own, then the geometry. */
    static final StructLayout RING = MemoryLayout.structLayout(
            U64.withName("head"), MemoryLayout.paddingLayout(56),
            U64.withName("tail"), MemoryLayout.paddingLayout(56),
            U32.withName("capacity"), U32.withName("entry_size"), MemoryLayout.paddingLayout(56));

    /** {@code SendDesc}. */
    static final StructLayout SEND = MemoryLayout.structLayout(
            U32.withName("offset"), U32.withName("len"), U16.withName("channel"), U16.withName("flags"),
            U32.withName("status"));

    /** {@code RecvDesc}: 56 bytes inline, or up to 14 buffer offsets. */
    static final StructLayout RECV = MemoryLayout.structLayout(
            U32.withName("len"), U16.withName("channel"), JAVA_BYTE.withName("flags"), JAVA_BYTE.withName("nbufs"),
            MemoryLayout.unionLayout(
                    MemoryLayout.sequenceLayout(56, JAVA_BYTE).withName("inline"),
                    MemoryLayout.sequenceLayout(14, U32).withName("offsets")).withName("data"));

    /** {@code EventDesc}. */
    static final StructLayout EVENT = MemoryLayout.structLayout(
            U16.withName("kind"), U16.withName("channel"), U32.withName("peer_endpoint"), U16.withName("port"),
            U16.withName("family"), U32.withName("arg"), MemoryLayout.sequenceLayout(16, JAVA_BYTE).withName("addr"));

    static final long ENDPOINT_MAGIC = 0x3130504554454e55L; // "UNETEP01", little-endian
    static final int RECV_INLINE = 1;
    static final int CHANNEL_OPENED = 1;

    static MemorySegment golden() throws Exception {
        Path p = Path.of(System.getProperty("unet.root"), "crates", "abi", "golden", "endpoint_v1.hex");
        assertTrue(Files.isRegularFile(p), "the golden vector at " + p);
        String hex = Files.readString(p, StandardCharsets.US_ASCII).replaceAll("\\s", "");
        byte[] b = new byte[hex.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return MemorySegment.ofArray(b);
    }

    static long get(StructLayout s, MemorySegment m, long base, MemoryLayout.PathElement... path) {
        VarHandle h = s.varHandle(path);
        Object v = h.get(m, base);
        return switch (v) {
            case Long l -> l;
            case Integer i -> Integer.toUnsignedLong(i);
            case Short sh -> Short.toUnsignedLong(sh);
            case Byte by -> Byte.toUnsignedLong(by);
            default -> throw new AssertionError(v);
        };
    }

    static long header(MemorySegment m, String f) {
        return get(HEADER, m, 0, groupElement(f));
    }

    /** Entry {@code i} of the ring at {@code off}, of layout {@code entry}. */
    static long entry(MemorySegment m, long ringOff, StructLayout entry, int i, MemoryLayout.PathElement... path) {
        return get(entry, m, ringOff + RING.byteSize() + i * entry.byteSize(), path);
    }

    @Test
    void theGoldenSegmentReadsAsTheRustLayoutWroteIt() throws Exception {
        MemorySegment m = golden();
        assertEquals(12288, m.byteSize(), "its length");
        assertEquals(0x70, HEADER.byteSize());
        assertEquals(192, RING.byteSize());
        assertEquals(16, SEND.byteSize());
        assertEquals(64, RECV.byteSize());
        assertEquals(32, EVENT.byteSize());

        assertEquals(ENDPOINT_MAGIC, header(m, "magic"));
        assertEquals(1, header(m, "version"));
        assertEquals(4096, header(m, "header_size"));
        assertEquals(12288, header(m, "segment_size"));
        assertEquals(7, header(m, "endpoint_id"));
        assertEquals(256, header(m, "buffer_size"));
        assertEquals(4, header(m, "send_cap"));
        assertEquals(2, header(m, "recv_cap"));
        assertEquals(8, header(m, "free_cap"));
        assertEquals(2, header(m, "event_cap"));
        long send = header(m, "send_off");
        long recv = header(m, "recv_off");
        long free = header(m, "free_off");
        long event = header(m, "event_off");
        long area = header(m, "buffer_area_off");
        assertEquals(4096, send);
        assertEquals(4352, recv);
        assertEquals(4672, free);
        assertEquals(4928, event);
        assertEquals(8192, area);
        assertEquals(4096, header(m, "buffer_area_size"));
        assertEquals(0x0123456789abcdefL, header(m, "engine_id"));

        assertEquals(1, get(RING, m, send, groupElement("head")));
        assertEquals(0, get(RING, m, send, groupElement("tail")));
        assertEquals(4, get(RING, m, send, groupElement("capacity")));
        assertEquals(SEND.byteSize(), get(RING, m, send, groupElement("entry_size")));
        assertEquals(512, entry(m, send, SEND, 0, groupElement("offset")));
        assertEquals(100, entry(m, send, SEND, 0, groupElement("len")));
        assertEquals(3, entry(m, send, SEND, 0, groupElement("channel")));
        assertEquals(1, entry(m, send, SEND, 0, groupElement("status")));

        assertEquals(2, get(RING, m, recv, groupElement("head")));
        assertEquals(5, entry(m, recv, RECV, 0, groupElement("len")));
        assertEquals(3, entry(m, recv, RECV, 0, groupElement("channel")));
        assertEquals(RECV_INLINE, entry(m, recv, RECV, 0, groupElement("flags")));
        byte[] hello = new byte[5];
        for (int i = 0; i < 5; i++) {
            hello[i] = (byte) entry(m, recv, RECV, 0, groupElement("data"), groupElement("inline"),
                    sequenceElement(i));
        }
        assertEquals("hello", new String(hello, StandardCharsets.US_ASCII));
        assertEquals(300, entry(m, recv, RECV, 1, groupElement("len")));
        assertEquals(9, entry(m, recv, RECV, 1, groupElement("channel")));
        assertEquals(2, entry(m, recv, RECV, 1, groupElement("nbufs")));
        assertEquals(1024, entry(m, recv, RECV, 1, groupElement("data"), groupElement("offsets"), sequenceElement(0)));
        assertEquals(1280, entry(m, recv, RECV, 1, groupElement("data"), groupElement("offsets"), sequenceElement(1)));

        assertEquals(3, get(RING, m, free, groupElement("head")));
        assertEquals(2048, Integer.toUnsignedLong(m.get(U32, free + RING.byteSize() + 2 * 4)));

        assertEquals(1, get(RING, m, event, groupElement("head")));
        assertEquals(CHANNEL_OPENED, entry(m, event, EVENT, 0, groupElement("kind")));
        assertEquals(9, entry(m, event, EVENT, 0, groupElement("channel")));
        assertEquals(42, entry(m, event, EVENT, 0, groupElement("peer_endpoint")));
        assertEquals(7700, entry(m, event, EVENT, 0, groupElement("port")));
        assertEquals(4, entry(m, event, EVENT, 0, groupElement("family")));
        assertEquals(0x0100007fL, Integer.toUnsignedLong(
                m.get(U32, event + RING.byteSize() + EVENT.byteOffset(groupElement("addr")))));

        assertEquals(0x44434241L, Integer.toUnsignedLong(m.get(U32, area + 512)));
    }
}
