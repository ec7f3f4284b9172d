# kiln bash kernel: the shell side. driver.py starts an interactive bash
# (bash -i --noediting, no terminal, no job control) and evaluates this file
# at the top level before the first cell. The driver then writes one command
# line per request on the shell's stdin and reads records, each ended by a
# NUL byte, from fd 21:
#
#	ready VERSION     this file has run
#	armed             the cell's code is read; SIGINT now stops it
#	done STATUS LINE  the cell is over; LINE is where exit or set -e stopped
#	                  it (the cell's top-level command), or 0
#	m NAME ... end    completion matches
#	restored          a dead shell's state is loaded
#
# Requests' arguments arrive NUL-terminated on fd 20. Fds 20 and 21 are closed
# for user commands, so nothing the user runs can read or forge them; the
# cell's stdin (a file or /dev/null) is a redirection of eval, which bash
# undoes after the cell, also after an interrupt, so the command pipe comes
# back even if the cell ran `exec <file`. So is its stderr: the kernel's,
# kept as fd 22 (closed for user commands too), while the shell's own is
# /dev/null, where bash's empty line after an interrupt goes. `exec 2>file`
# lasts for the rest of its cell.
#
# A cell runs as `eval "$code"` at the top level (not in a function, so that
# declare makes globals). Aliases are expanded, as in any interactive shell.
# bash prints "[1] PID" on stderr when a cell starts a background job.
#
# Why interactive: on SIGINT an interactive bash abandons the command line it
# is running, whatever loops or functions it is in, and goes back to reading
# the next one, with every variable, function and option intact. A
# non-interactive bash either dies or, with a trap, carries on with the loop.
# The kernel ignores SIGINT except while a cell's code runs, so an interrupt
# cannot cut a request or a report in half.
#
# `exit` in the shell itself (not in a subshell) and a failure under set -e
# would end the shell and lose the session. A function named exit and an ERR
# trap (with errtrace, so it also fires in functions) stop the cell the same
# way an interrupt does, by sending SIGINT to the shell itself, and the shell
# lives on (with set -e still on). Some exits remain: an expansion error under set -e (an unset
# variable with set -u, ${x:?}), `builtin exit`, exit under set -o posix
# (special builtins come before functions), a user ERR trap that replaces
# ours. For those the EXIT trap saves the session's state and the driver
# starts a new shell that loads it. exec of a program, or a signal, ends the
# shell without the trap: the new shell starts afresh.
#
# Reserved: the INT, ERR and EXIT traps and PROMPT_COMMAND are the kernel's
# (a cell's INT trap lasts until the cell ends; replacing ERR or EXIT loses
# what they do above); names starting with __kiln_; fds 20 and 21. xtrace
# and verbose are off between cells and back on for the next
# one, so they show only the user's commands (doubled PS4: "++ cmd", since
# the cell is an eval). LINENO counts lines since the shell started.
#
# Every builtin is called through `builtin` so that a user function named
# like one does not get in the way, and every command word we send starts
# with a backslash so that aliases do not apply.

builtin set +m +H +o history -E
builtin unset HISTFILE MAILCHECK PROMPT_COMMAND
builtin export -n PS1 PS2
PS1='' PS2='' PS0=''
__kiln_pid=$BASHPID
__kiln_running=''
__kiln_exit=''
__kiln_line=0
__kiln_base=0
__kiln_errexit=''
__kiln_code=''
__kiln_in=/dev/null
__kiln_pre=''
__kiln_xtrace=''
__kiln_verbose=''
__kiln_state=${__KILN_STATE-}
builtin unset __KILN_STATE
builtin trap '' INT
builtin trap '{ \__kiln_on_err; } 2>/dev/null' ERR
builtin trap '\__kiln_on_exit' EXIT

# __kiln_begin reads a cell (code, then the stdin file) with SIGINT still
# ignored, clears xtrace and verbose (the cell's eval sets them again first
# thing), and arms SIGINT. It runs with stderr on /dev/null.
__kiln_begin() {
	__kiln_running=1
	__kiln_exit=''
	__kiln_line=0
	__kiln_base=${BASH_LINENO[0]-0}
	IFS= builtin read -r -d '' __kiln_code <&20
	IFS= builtin read -r -d '' __kiln_in <&20
	__kiln_pre=''
	if [[ $- == *x* || -n $__kiln_xtrace ]]; then
		__kiln_pre+='builtin set -x;'
		builtin set +x
	fi
	if [[ $- == *v* || -n $__kiln_verbose ]]; then
		__kiln_pre+='builtin set -v;'
		builtin set +v
	fi
	__kiln_xtrace=''
	__kiln_verbose=''
	builtin trap - INT
	builtin printf 'armed\0' >&21
	builtin return 0
}

# __kiln_after reports the end of a cell. The cell's command line calls it
# last; PROMPT_COMMAND calls it too, after every command line, also one that
# SIGINT (or our exit) abandoned. Whichever comes first reports.
__kiln_after() {
	builtin local s=$?
	builtin trap '' INT
	if [[ $- == *x* ]]; then
		builtin set +x
		__kiln_xtrace=1
	fi
	if [[ $- == *v* ]]; then
		builtin set +v
		__kiln_verbose=1
	fi
	PROMPT_COMMAND='{ \__kiln_after || builtin :; } 2>/dev/null'
	[[ -n $__kiln_running ]] || builtin return 0
	__kiln_running=''
	\__kiln_pkg_env
	if [[ -n $__kiln_exit ]]; then
		s=$__kiln_exit
		__kiln_exit=''
	fi
	if [[ -n $__kiln_errexit ]]; then
		builtin set -e
		__kiln_errexit=''
	fi
	__kiln_code=''
	if ((__kiln_line > 0)); then
		__kiln_line=$((__kiln_line - __kiln_base + 1))
	fi
	builtin printf 'done %d %d\0' "$s" "$__kiln_line" >&21
}

# __kiln_stop ends the running cell from inside it: SIGINT to the shell
# itself. bash acts on it before its next command and, as after any
# interrupt, prints an empty line on the shell's own stderr (/dev/null).
__kiln_stop() {
	builtin kill -INT "$__kiln_pid"
}

# exit in the shell itself stops the cell with the status; in a subshell it
# is bash's. Its work is done in __kiln_exit with stderr off (messages go to
# fd 9, the caller's stderr), so that xtrace shows only the user's "exit N".
exit() {
	{ \__kiln_exit "$@"; } 9>&2 2>/dev/null
	builtin exit "$@"
}

logout() {
	{ \__kiln_exit "$@"; } 9>&2 2>/dev/null
	builtin exit "$@"
}

# read -p prints its prompt only when the input is a terminal, and a cell's
# stdin never is one: the prompt goes to stderr (fd 9 in __kiln_prompt)
# first, as bash would print it, then the builtin reads. When it is about
# to read the cell's open stdin (the driver's FIFO), the driver is told
# (SIGUSR1, SIGUSR2 for -s: a secret), so that the client hears that input
# is wanted; the driver asks ahead and cannot tell otherwise.
read() {
	{ \__kiln_prompt "$@"; } 9>&2 2>/dev/null
	builtin read "$@"
}

__kiln_prompt() {
	builtin local OPTIND=1 OPTARG o p='' fd=0 has='' sig=USR1 poll=''
	while builtin getopts ':a:d:ei:n:N:p:rst:u:' o; do
		case $o in
		p) p=$OPTARG has=1 ;;
		s) sig=USR2 ;;
		t) [[ $OPTARG =~ ^0*(\.0*)?$ ]] && poll=1 ;;
		u) fd=$OPTARG ;;
		esac
	done
	[[ $fd =~ ^[0-9]+$ ]] || builtin return 0
	[[ -z $has || -t $fd ]] || builtin printf '%s' "$p" >&9
	if [[ -z $poll && -p $__kiln_in && /proc/self/fd/$fd -ef $__kiln_in ]]; then
		builtin kill -s "$sig" "$PPID"
	fi
	builtin return 0
}

# __kiln_exit returns the status it was called with, for a bare `exit`.
__kiln_exit() {
	builtin local s=$? n
	if [[ $BASHPID == "$__kiln_pid" && -n $__kiln_running ]]; then
		if (($#)); then
			n=${1#+}
			if [[ $n =~ ^-?[0-9]{1,18}$ ]]; then
				if [[ $n == -* ]]; then
					s=$((-(10#${n#-}) & 255))
				else
					s=$((10#$n & 255))
				fi
			else
				builtin printf 'bash: exit: %s: numeric argument required\n' "$1" >&9
				s=2
			fi
		fi
		__kiln_exit=$s
		__kiln_line=${BASH_LINENO[${#BASH_LINENO[@]}-1]-0}
		\__kiln_stop
	fi
	builtin return "$s"
}

__kiln_on_err() {
	builtin local s=$?
	if [[ $- == *e* && $BASHPID == "$__kiln_pid" && -n $__kiln_running ]]; then
		__kiln_exit=$s
		__kiln_line=${BASH_LINENO[${#BASH_LINENO[@]}-1]-0}
		__kiln_errexit=1
		builtin set +e
		\__kiln_stop
	fi
	builtin return "$s"
}

# __kiln_on_exit runs when the shell really ends during a cell (see above):
# it writes the session's variables, functions, aliases, options, umask and
# working directory to $__kiln_state, a file in the driver's private
# directory, which the next shell sources. Background jobs, open
# descriptors, traps and limits are not carried over.
__kiln_on_exit() {
	[[ $BASHPID == "$__kiln_pid" && -n $__kiln_running && -n $__kiln_state ]] || builtin return 0
	{
		builtin compgen -v | while IFS= builtin read -r __kiln_n; do
			case $__kiln_n in
			BASH* | EUID | UID | PPID | SHELLOPTS | BASHOPTS | FUNCNAME | GROUPS | PIPESTATUS | LINENO | \
				RANDOM | SRANDOM | SECONDS | EPOCHSECONDS | EPOCHREALTIME | HISTCMD | DIRSTACK | \
				COMP_WORDBREAKS | _ | PS0 | PS1 | PS2 | PROMPT_COMMAND | SHLVL | OLDPWD | PWD | __kiln_*) ;;
			*) builtin declare -p "$__kiln_n" ;;
			esac
		done
		builtin declare -F | while IFS=' ' builtin read -r _ __kiln_a __kiln_n; do
			case $__kiln_n in
			__kiln_* | exit | logout | read) ;;
			*)
				builtin declare -f "$__kiln_n"
				[[ $__kiln_a != *x* ]] || builtin printf 'builtin export -f %s\n' "$__kiln_n"
				;;
			esac
		done
		builtin alias -p
		builtin umask -p
		builtin printf 'builtin cd -- %q\n' "$PWD"
		builtin shopt -p
		builtin set +o # last: errexit and nounset apply from here on
	} >"$__kiln_state" 2>/dev/null
}

# __kiln_complete answers a completion request: a mode (command, file,
# directory, variable) and a word, both read from fd 20.
__kiln_complete() {
	builtin local mode word m
	IFS= builtin read -r -d '' mode <&20
	IFS= builtin read -r -d '' word <&20
	builtin printf 'm\0' >&21
	case $mode in
	command)
		builtin compgen -c -- "$word"
		;;
	variable)
		builtin compgen -v -- "$word"
		;;
	file)
		builtin compgen -f -- "$word" | while IFS= builtin read -r m; do
			if [[ -d $m ]]; then
				builtin printf '%s/\n' "$m"
			else
				builtin printf '%s\n' "$m"
			fi
		done
		;;
	esac 2>/dev/null | while IFS= builtin read -r m; do
		[[ $m == __kiln_* ]] || builtin printf '%s\0' "$m"
	done >&21
	builtin printf 'end\0' >&21
}

PROMPT_COMMAND='{ \__kiln_after || builtin :; } 2>/dev/null'

# Packages typed in a cell go where the API's installs go
# (service/packages.go), through the same egress proxy and package policy
# (the sandbox's PIP_INDEX_URL and npm_config_registry). pip: into the
# session's venv on the sandbox's private /tmp, made on first use as the
# API makes it (--system-site-packages; --without-pip, so pip and pip3 in
# its bin/ are scripts that run the system's pip with the venv's python,
# which installs into the venv and is not refused by PEP 668). Its bin/ is
# first on PATH, so once it exists it is every command's python3 and pip.
# npm install NAME: into the session's node prefix, not the workspace,
# unless the command says where (-g, --prefix, --location).
__kiln_venv=${TMPDIR:-/tmp}/.kiln/packages/python
__kiln_node=${TMPDIR:-/tmp}/.kiln/packages/node
__kiln_venv_seen=
[[ :$PATH: == *":$__kiln_venv/bin:"* ]] || builtin export PATH=$__kiln_venv/bin:$PATH
builtin export PATH=$PATH:$__kiln_node/node_modules/.bin
builtin export NODE_PATH=$__kiln_node/node_modules${NODE_PATH:+:$NODE_PATH}

# __kiln_pkg_env runs at the end of each cell (__kiln_after): once the
# venv is there (made by a cell's pip, maybe in a pipeline's subshell, or
# by the API), VIRTUAL_ENV names it and the shell forgets where it found
# python3 and pip.
__kiln_pkg_env() {
	[[ -z ${__kiln_venv_seen-} && -x $__kiln_venv/bin/python ]] || builtin return 0
	__kiln_venv_seen=1
	builtin export VIRTUAL_ENV=$__kiln_venv
	builtin hash -r
}
\__kiln_pkg_env

__kiln_mkvenv() {
	if [[ ! -x $__kiln_venv/bin/python ]]; then
		\command python3 -m venv --without-pip --system-site-packages "$__kiln_venv" || builtin return
	fi
	\command sh -c "$__kiln_pipshims" sh "$__kiln_venv" || builtin return
	\__kiln_pkg_env
}

# The same script as service/packages.go's pipShims: pip and pip3 in the
# venv's bin/, unless there are some (pip installed into the venv).
__kiln_pipshims='for n in pip pip3; do [ -e "$1/bin/$n" ] || { printf "#!/bin/sh\n# kiln: the system pip, run by this venv python (the venv has no pip of its own)\nexec \"%s/bin/python\" -m pip \"\$@\"\n" "$1" >"$1/bin/$n" && chmod 755 "$1/bin/$n"; } || exit; done'

pip() { \__kiln_mkvenv && "$__kiln_venv/bin/pip" "$@"; }
pip3() { \__kiln_mkvenv && "$__kiln_venv/bin/pip3" "$@"; }
python3() {
	[[ ${1-} != -m || ${2-} != pip ]] || \__kiln_mkvenv || builtin return
	if [[ -x $__kiln_venv/bin/python3 ]]; then
		"$__kiln_venv/bin/python3" "$@"
	else
		\command python3 "$@"
	fi
}

npm() {
	builtin local a names=
	case ${1-} in
	install | i | in | ins | inst | insta | instal | isnt | isnta | isntal | isntall | add | \
		uninstall | unlink | remove | rm | r | un)
		for a in "${@:2}"; do
			case $a in
			-g | --global | --global=* | --prefix | --prefix=* | --location | --location=* | -C) names= && break ;;
			-*) ;;
			*) names=1 ;;
			esac
		done
		;;
	esac
	if [[ -n $names ]]; then
		\command mkdir -p "$__kiln_node" && \command npm --prefix "$__kiln_node" "$@"
	else
		\command npm "$@"
	fi
}
