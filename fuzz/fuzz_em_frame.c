/*
 * libFuzzer target for the binary frame decoder (msg.h), the parser on the
 * ZeroMQ hop between gateway and engine. A bus payload is one or more
 * concatenated frames, walked exactly as here (decode, advance by the
 * length, stop at the first that does not decode): the engine's on_inbound
 * and the gateway's on_event. Every frame it accepts must be a
 * valid message that encodes back to the very same bytes, and whose ALF
 * form parses back to the same message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    while (size > 0) {
        struct em_msg m, t;
        int n = em_frame_decode(data, size, &m);
        if (n <= 0)
            return 0;
        if (em_msg_check(&m) != 0)
            abort();
        uint8_t again[EM_FRAME_MAX];
        int k = em_frame_encode(&m, again, sizeof again);
        if (k != n || memcmp(again, data, (size_t)n) != 0)
            abort();
        char text[EM_ALF_FORMAT_MAX];
        size_t tl = em_alf_format(&m, text);
        /* the text form parses back: the codec applies ALF's rules
         * across fields too (em_msg_check_rules). Only an event's ids
         * and counts may have more digits than ALF input allows. */
        int rc = em_alf_parse(text, tl, &t);
        if (rc != 0 && em_msgs[m.kind].cls != EM_CLASS_EVENT)
            abort();
        if (rc == 0) {
            char text2[EM_ALF_FORMAT_MAX];
            size_t tl2 = em_alf_format(&t, text2);
            if (tl2 != tl || memcmp(text, text2, tl) != 0)
                abort();
        }
        data += n;
        size -= (size_t)n;
    }
    return 0;
}
