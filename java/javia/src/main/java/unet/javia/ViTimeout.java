package unet.javia;

/** A wait ended before anything completed. */
public class ViTimeout extends ViException {
    private static final long serialVersionUID = 1L;

    /** A wait of {@code microseconds} that found nothing. */
    public ViTimeout(long microseconds) {
        super("nothing completed within " + microseconds + " microseconds");
    }
}
