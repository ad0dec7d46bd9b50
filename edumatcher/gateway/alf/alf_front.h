/*
 * The ALF front end: ALF lines (spec §1-4) over the connections of a
 * core_server, each connection one gateway session (gateway_session.h).
 *
 * em_alf_front_ops are the core_server callbacks; give the struct em_gw
 * as the server's `app`. Per connection it splits input into lines (an
 * overlong line is discarded up to its \n and answered LINE_TOO_LONG,
 * the session stays open), parses each with em_alf_parse and hands it to
 * the session; while the session logs in it holds the input (at most
 * EM_ALF_HELD_MAX bytes, else the connection closes) and handles it once
 * the session is LIVE. Events are formatted with em_alf_format, one line
 * each, and written once per batch.
 */
#ifndef EM_ALF_FRONT_H
#define EM_ALF_FRONT_H

#include "core/uv_server.h"

#define EM_ALF_HELD_MAX (64u * 1024) /* input held while logging in */

extern const struct core_server_ops em_alf_front_ops;

#endif
