# The server's lifecycle for real.sh (sourced). server_test.go runs these
# functions against fake server processes in make test.

# port_open PORT: something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_server OUT LOG CMD...: runs CMD in the background, its stdout to
# OUT and stderr to LOG, and sets SERVER to its pid. CMD must be a program:
# a shell function backgrounded runs in a subshell whose pid is not the
# server's, and SIGTERM to that subshell leaves the server running.
start_server() {
	local out=$1 log=$2
	shift 2
	if [[ $(type -t "$1") != file ]]; then
		echo "start_server: $1 is not a program (a ${1:+$(type -t "$1")}); give its path" >&2
		return 2
	fi
	"$@" >"$out" 2>"$log" &
	SERVER=$!
}

# stop_server PORT...: SIGTERM to the server, SIGKILL if it has not exited
# STOP_TIMEOUT seconds (default 30) later; fails when it had to be killed
# or something still accepts connections on a PORT (a server that outlived
# whatever was signalled). Never waits forever.
stop_server() {
	local pid=${SERVER:-} rc=0 i
	SERVER=
	if [[ -n $pid ]]; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < ${STOP_TIMEOUT:-30} * 10; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "the server (pid $pid) was still running ${STOP_TIMEOUT:-30} s after SIGTERM; killed" >&2
			kill -KILL "$pid" 2>/dev/null || true
			rc=1
		fi
		wait "$pid" 2>/dev/null || true
	fi
	for p in "$@"; do
		if port_open "$p"; then
			echo "something still answers on 127.0.0.1:$p after the server stopped" >&2
			rc=1
		fi
	done
	return $rc
}
