package unet.sle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class NativesTest {
    @Test
    void idReturnsItsArgument() {
        assertEquals(-7, Natives.id(-7));
        assertEquals(Integer.MIN_VALUE, Natives.id(Integer.MIN_VALUE));
    }

    @Test
    void sumAddsSignedBytesOfTheRange() {
        byte[] a = {1, 2, -3, 127, -128};
        assertEquals(1 + 2 - 3 + 127 - 128, Natives.sum(a, 0, 5));
        assertEquals(2 - 3, Natives.sum(a, 1, 2));
        assertEquals(0, Natives.sum(a, 5, 0));
    }

    @Test
    void sumRejectsRangesOutsideTheArray() {
        byte[] a = new byte[4];
        assertThrows(ArrayIndexOutOfBoundsException.class, () -> Natives.sum(a, 2, 3));
        assertThrows(ArrayIndexOutOfBoundsException.class, () -> Natives.sum(a, -1, 1));
        assertThrows(ArrayIndexOutOfBoundsException.class, () -> Natives.sum(a, 0, -1));
        assertThrows(NullPointerException.class, () -> Natives.sum(null, 0, 0));
    }

    @Test
    void fillNarrowsAndStopsAtLen() {
        byte[] a = new byte[4];
        Natives.fill(a, 0x1ff, 3);
        assertArrayEquals(new byte[] {-1, -1, -1, 0}, a);
        assertThrows(ArrayIndexOutOfBoundsException.class, () -> Natives.fill(a, 1, 5));
        assertThrows(NullPointerException.class, () -> Natives.fill(null, 1, 0));
    }

    @Test
    void nopReturns() {
        Natives.nop();
    }
}
