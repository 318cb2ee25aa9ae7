/**
 * Every variable bash(1) documents under "Shell Variables" (5.2, and 5.3's GLOBSORT), whether bash
 * sets it, reads it, or only its interactive parts use it. Bash drops some from the environment it
 * passes on (RANDOM, BASHPID, HISTCMD...), rewrites others (LINENO, PS4, EPOCHSECONDS, SHLVL, an
 * OLDPWD that is no directory), acts on some (SHELLOPTS=xtrace, BASH_ENV, BASH_XTRACEFD) and warns
 * on others (an uninstalled LC_ALL, a bad BASH_COMPAT) into the run's terminal. Rather than the few
 * seen to matter today, the closing shell sees none of them: the whole documented list is kept from
 * it and given back by env(1) (test/pty-closer.test.ts tries every one of them, and every variable
 * a bash here defines, with odd values).
 */
const DOCUMENTED = new Set(
  (
    '_ BASH BASHOPTS BASHPID BASH_ALIASES BASH_ARGC BASH_ARGV BASH_ARGV0 BASH_CMDS BASH_COMMAND ' +
    'BASH_EXECUTION_STRING BASH_LINENO BASH_LOADABLES_PATH BASH_MONOSECONDS BASH_REMATCH BASH_SOURCE ' +
    'BASH_SUBSHELL BASH_TRAPSIG BASH_VERSINFO BASH_VERSION COMP_CWORD COMP_KEY COMP_LINE COMP_POINT ' +
    'COMP_TYPE COMP_WORDBREAKS COMP_WORDS COPROC DIRSTACK EPOCHREALTIME EPOCHSECONDS EUID FUNCNAME ' +
    'GROUPS HISTCMD HOSTNAME HOSTTYPE LINENO MACHTYPE MAPFILE OLDPWD OPTARG OPTIND OSTYPE PIPESTATUS ' +
    'PPID PWD RANDOM READLINE_ARGUMENT READLINE_LINE READLINE_MARK READLINE_POINT REPLY SECONDS ' +
    'SHELLOPTS SHLVL SRANDOM UID ' +
    'BASH_COMPAT BASH_ENV BASH_XTRACEFD CDPATH CHILD_MAX COLUMNS COMPREPLY EMACS ENV EXECIGNORE FCEDIT ' +
    'FIGNORE FUNCNEST GLOBIGNORE GLOBSORT HISTCONTROL HISTFILE HISTFILESIZE HISTIGNORE HISTSIZE ' +
    'HISTTIMEFORMAT HOME HOSTFILE IFS IGNOREEOF INPUTRC INSIDE_EMACS LANG LANGUAGE LC_ALL LC_COLLATE ' +
    'LC_CTYPE LC_MESSAGES LC_NUMERIC LC_TIME LINES MAIL MAILCHECK MAILPATH OPTERR PATH POSIXLY_CORRECT ' +
    'PROMPT_COMMAND PROMPT_DIRTRIM PS0 PS1 PS2 PS3 PS4 SHELL TERM TEXTDOMAIN TEXTDOMAINDIR TIMEFORMAT ' +
    'TMOUT TMPDIR auto_resume histchars'
  ).split(' '),
);

/**
 * Families rather than names, so that a newer bash's additions are covered too: bash's own names
 * and exported functions (BASH_FUNC_f%%), completion and readline state, every locale category
 * (LC_ADDRESS...), and what the dynamic loader and libc's malloc read (LD_DEBUG, LD_PRELOAD,
 * MALLOC_CHECK_, GLIBC_TUNABLES): those would act in bash and env(1) too, not only in the command.
 */
const FAMILY = /^(BASH|COMP_|READLINE_|HIST|LC_|LD_|MALLOC_|GLIBC_TUNABLES$)/;

/** Whether the closing shell must not see `name`: env(1) gives it to the command instead. */
export function bashTouches(name: string): boolean {
  return DOCUMENTED.has(name) || FAMILY.test(name);
}

/** The exact names bash may export on its own (PWD, SHLVL, ...): env(1) unsets those the run has not. */
export const BASH_NAMES: readonly string[] = [...DOCUMENTED];
