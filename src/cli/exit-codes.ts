// The CLI's exit statuses, apart from the functions that choose among them: `procwarden --version`
// needs the numbers and none of the signal table those functions read.

/** The statuses coreutils timeout(1) made conventional; procwarden run and timeout share them. */
export const EXIT_TIMED_OUT = 124;
export const EXIT_FAILED = 125;
export const EXIT_CANNOT_EXECUTE = 126;
export const EXIT_NOT_FOUND = 127;
/** kill, tree and proof: a target could not be ended / a case did not hold. */
export const EXIT_FAILURE = 1;
/** kill, tree, proof and procwarden itself: bad command-line input. */
export const EXIT_USAGE = 2;
