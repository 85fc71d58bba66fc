/* A client of a daemon, linked against a unet library built without its
 * default features (no embedded engine, no inline placement): it talks to
 * the engine whose control socket is argv[1], moves messages both ways,
 * and checks that the facilities left out say so (UNET_ENOTSUP). Prints
 * "ok" when every check passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unet.h"

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__,    \
                    __LINE__, #cond, unet_last_error_message());           \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

int main(int argc, char **argv) {
    CHECK(argc == 2);
    unet_engine *engine = NULL;
    CHECK(unet_engine_start(NULL, NULL, &engine) == UNET_ENOTSUP);
    CHECK(engine == NULL);
    CHECK(strstr(unet_last_error_message(), "embedded") != NULL);
    CHECK(strcmp(unet_status_name(UNET_ENOTSUP), "UNET_ENOTSUP") == 0);

    unet_session *s = NULL;
    CHECK(unet_session_connect(argv[1], &s) == UNET_OK);
    unet_endpoint_config cfg;
    CHECK(unet_endpoint_config_init(&cfg) == UNET_OK);
    unet_endpoint *a = NULL, *b = NULL;
    CHECK(unet_endpoint_create(s, &cfg, &a) == UNET_OK);
    CHECK(unet_endpoint_create(s, &cfg, &b) == UNET_OK);

    char addr[32];
    snprintf(addr, sizeof addr, "%lld", (long long)unet_endpoint_id(b));
    char buf[2048];
    for (int path = UNET_PATH_DIRECT; path <= UNET_PATH_ENGINE; path++) {
        uint16_t ch;
        CHECK(unet_open_channel(a, addr, path, &ch) == UNET_OK);
        for (int i = 0; i < 100; i++) {
            char msg[1000];
            size_t len = 1 + (size_t)(i * 37) % sizeof msg;
            memset(msg, 'a' + i % 26, len);
            CHECK(unet_send(a, ch, msg, len) == UNET_OK);
            size_t got = 0;
            uint16_t from = 0;
            CHECK(unet_recv(b, buf, sizeof buf, 5000000000LL, &got, &from) == UNET_OK);
            CHECK(got == len && memcmp(buf, msg, len) == 0);
        }
        CHECK(unet_close_channel(a, ch) == UNET_OK);
    }

    /* An applet in this process needs the inline placement; the check
     * comes before the class is looked at. */
    static const unsigned char not_a_class[4] = {0xca, 0xfe, 0xba, 0xbe};
    CHECK(unet_attach_applet(a, not_a_class, sizeof not_a_class, 0, 0, 1) == UNET_ENOTSUP);
    CHECK(strstr(unet_last_error_message(), "inline") != NULL);

    unet_endpoint_close(a);
    unet_endpoint_close(b);
    unet_session_close(s);
    puts("ok");
    return 0;
}
