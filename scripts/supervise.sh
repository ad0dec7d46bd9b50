# Process supervision for the launchers (scripts/gridsync-cluster and
# scripts/edumatcher), sourced, not run. Bash 5.1 or later (wait -n -p).
#
# A launcher defines one function run_<name> per process (it execs the
# binary, with its output redirected as it likes), registers the names in
# start order with sv_start, and then calls sv_supervise:
#
#   sv_start NAME READY_FN   start run_NAME in the background and wait until
#                            READY_FN NAME succeeds (up to SV_READY_S
#                            seconds); if the process dies or is not ready
#                            in time, stop everything and exit 1 (start-up
#                            failed: `make run` exits non-zero).
#   sv_supervise             until Ctrl-C or TERM: when a process exits, say
#                            so on stderr and start it again after a second
#                            (a restarted process recovers from its own
#                            state: Raft data, the journal), or with
#                            SV_RESTART=0 (--no-restart) leave it down while
#                            the others go on. A process that dies within
#                            SV_FAST_S seconds of its start SV_FAST_MAX times
#                            in a row is left down too.
#
# SV_ON_STOP names a function to call after everything has stopped.
#
# Messages start with "$SV_PROG: " so that tests and people can follow them:
#   "<name> (pid P) exited with status S", "<name> restarted (pid P)",
#   "<name> left down".

SV_READY_S=${SV_READY_S:-30}
SV_RESTART=${SV_RESTART:-1}
SV_FAST_S=${SV_FAST_S:-3}
SV_FAST_MAX=${SV_FAST_MAX:-5}
declare -A sv_pid=() sv_since=() sv_fast=()
sv_names=()
sv_stopping=0

sv_say() { echo "$SV_PROG: $*" >&2; }

sv_spawn() {
  local name=$1
  "run_$name" &
  sv_pid[$name]=$!
  sv_since[$name]=$SECONDS
}

# Stop every process, last started first (for EduMatcher: the gateway
# before the engine, so that its sessions' DISCONNECTs reach the engine).
sv_stop_all() {
  sv_stopping=1
  trap - INT TERM EXIT
  local i name
  for ((i = ${#sv_names[@]} - 1; i >= 0; i--)); do
    name=${sv_names[$i]}
    [ -n "${sv_pid[$name]:-}" ] && kill -TERM "${sv_pid[$name]}" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  ${SV_ON_STOP:-true}
}

sv_on_signal() {
  sv_stop_all
  exit 0
}
trap sv_on_signal INT TERM
trap sv_stop_all EXIT

sv_start() {
  local name=$1 ready=$2 deadline=$((SECONDS + SV_READY_S))
  sv_names+=("$name")
  sv_fast[$name]=0
  sv_spawn "$name"
  until "$ready" "$name"; do
    if ! kill -0 "${sv_pid[$name]}" 2>/dev/null; then
      sv_say "$name did not start (exited during start-up)"
      exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      sv_say "$name did not start within ${SV_READY_S}s"
      exit 1
    fi
    sleep 0.1
  done
}

sv_supervise() {
  local done_pid status name n
  while :; do
    local live=()
    for n in "${sv_names[@]}"; do [ -n "${sv_pid[$n]:-}" ] && live+=("${sv_pid[$n]}"); done
    if [ ${#live[@]} -eq 0 ]; then
      sv_say "every process is down"
      return 1
    fi
    done_pid=""
    status=0
    wait -n -p done_pid "${live[@]}" || status=$?
    [ $sv_stopping -eq 1 ] && return 0
    [ -n "$done_pid" ] || continue
    name=""
    for n in "${sv_names[@]}"; do [ "${sv_pid[$n]:-}" = "$done_pid" ] && name=$n; done
    [ -n "$name" ] || continue
    sv_say "$name (pid $done_pid) exited with status $status"
    sv_pid[$name]=""
    if [ "$SV_RESTART" != 1 ]; then
      sv_say "$name left down (--no-restart)"
      continue
    fi
    if [ $((SECONDS - sv_since[$name])) -lt "$SV_FAST_S" ]; then
      sv_fast[$name]=$((sv_fast[$name] + 1))
    else
      sv_fast[$name]=0
    fi
    if [ "${sv_fast[$name]}" -ge "$SV_FAST_MAX" ]; then
      sv_say "$name left down (it exited within ${SV_FAST_S}s of its start $SV_FAST_MAX times)"
      continue
    fi
    sleep 1
    sv_spawn "$name"
    sv_say "$name restarted (pid ${sv_pid[$name]})"
  done
}

# A ready check for servers that accept TCP on 127.0.0.1:<port>; the
# launcher sets sv_port[<name>].
declare -A sv_port=()
sv_listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/${sv_port[$1]}") 2>/dev/null
}
