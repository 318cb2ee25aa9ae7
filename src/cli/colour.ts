/** Colour only for a person at a terminal: stderr is a TTY and NO_COLOR (no-color.org) is unset or empty. */
export function useColour(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  return stream.isTTY === true && !env.NO_COLOR;
}

const CODES = { bold: 1, red: 31, green: 32, yellow: 33, dim: 2 } as const;

export type Paint = (style: keyof typeof CODES, text: string) => string;

export function painter(enabled: boolean): Paint {
  return enabled ? (style, text) => `\x1b[${CODES[style]}m${text}\x1b[0m` : (_style, text) => text;
}
