package unet.javia;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * No second definition of the layout drifts: the structures Javia passes
 * to the library have the sizes the C header asserts (its
 * UNET_STATIC_ASSERT lines, read from include/unet.h) and the field
 * offsets of its declarations. (Javia reads no shared memory itself;
 * GoldenVectorTest reads the golden segment of crates/abi/golden through a
 * Java description of the shared-memory layout.)
 */
class LayoutTest {
    private static Map<String, Long> headerSizes() throws Exception {
        Path h = Path.of(System.getProperty("unet.root"), "include", "unet.h");
        assertTrue(Files.isRegularFile(h), "the C header at " + h);
        String text = Files.readString(h);
        // UNET_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(unet_vi_seg) == 24, ...
        Matcher m = Pattern.compile("sizeof\\((unet_\\w+)\\)\\s*==\\s*(\\d+)").matcher(text);
        Map<String, Long> sizes = new HashMap<>();
        while (m.find()) {
            sizes.put(m.group(1), Long.parseLong(m.group(2)));
        }
        return sizes;
    }

    private static long offset(StructLayout s, String field) {
        return s.byteOffset(MemoryLayout.PathElement.groupElement(field));
    }

    @Test
    void javiaStructuresMatchTheCHeader() throws Exception {
        Map<String, Long> sizes = headerSizes();
        assertEquals(sizes.get("unet_vi_attrs"), Native.VI_ATTRS.byteSize(), "unet_vi_attrs");
        assertEquals(sizes.get("unet_vi_seg"), Native.VI_SEG.byteSize(), "unet_vi_seg");
        assertEquals(sizes.get("unet_vi_completion"), Native.VI_COMPLETION.byteSize(), "unet_vi_completion");
        // The offsets Vi writes and reads by number.
        assertEquals(0, offset(Native.VI_ATTRS, "reliability"));
        assertEquals(4, offset(Native.VI_ATTRS, "strict_rnr"));
        assertEquals(8, offset(Native.VI_ATTRS, "send_queue"));
        assertEquals(12, offset(Native.VI_ATTRS, "recv_queue"));
        assertEquals(16, offset(Native.VI_ATTRS, "spin_us"));
        assertEquals(24, offset(Native.VI_ATTRS, "send_cq"));
        assertEquals(32, offset(Native.VI_ATTRS, "recv_cq"));
        assertEquals(0, offset(Native.VI_SEG, "region"));
        assertEquals(8, offset(Native.VI_SEG, "offset"));
        assertEquals(16, offset(Native.VI_SEG, "len"));
        assertEquals(0, offset(Native.VI_COMPLETION, "id"));
        assertEquals(8, offset(Native.VI_COMPLETION, "status"));
        assertEquals(12, offset(Native.VI_COMPLETION, "len"));
    }
}
