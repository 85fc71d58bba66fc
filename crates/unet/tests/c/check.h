/* The checks of the C test programs: each failure prints the line, the
 * call or condition, the status with its name and the library's last
 * error message, and exits 1; `checks` counts the checks that passed. */
#ifndef UNET_TEST_CHECK_H
#define UNET_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "unet.h"

static unsigned checks;

static void fail(const char *what, int rc, int line) {
    fprintf(stderr, "line %d: %s: %d (%s): %s\n", line, what, rc,
            unet_status_name(rc), unet_last_error_message());
    exit(1);
}

/* Check that a call returned want. */
#define CHECK_RC(call, want)                                                   \
    do {                                                                       \
        int rc_ = (int)(call);                                                 \
        if (rc_ != (want))                                                     \
            fail(#call, rc_, __LINE__);                                        \
        checks++;                                                              \
    } while (0)

/* Check that a condition holds. */
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            fail(#cond, 0, __LINE__);                                          \
        checks++;                                                              \
    } while (0)

#endif
