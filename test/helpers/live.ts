import type { LiveSession, RunSpec } from '../../src/index.js';
import { fixture, waitFor } from './procs.js';

/** The spec of the JSON-lines agent fixture, writing its pid files into `dir`. */
export function agentSpec(dir: string): RunSpec {
  return { argv: [process.execPath, fixture('live-agent.mjs'), dir] };
}

export type AgentMessage = { type: string; [field: string]: unknown };

/** Every JSON line the session's process printed, in order. */
export class Transcript {
  readonly messages: AgentMessage[] = [];

  constructor(readonly session: LiveSession) {
    session.on('line', (line) => this.messages.push(JSON.parse(line) as AgentMessage));
  }

  send(message: Record<string, unknown>): void {
    this.session.write(`${JSON.stringify(message)}\n`);
  }

  has(type: string, field?: Record<string, unknown>): boolean {
    return this.messages.some((m) => m.type === type && matches(m, field));
  }

  wait(type: string, field?: Record<string, unknown>): Promise<AgentMessage> {
    return waitFor(() => this.messages.find((m) => m.type === type && matches(m, field)), {
      what: `${type} ${JSON.stringify(field ?? {})} from ${this.session.id}`,
    });
  }

  /** Starts a background child in the agent and waits until it runs. */
  async spawnChild(name: string, ms: number): Promise<number> {
    this.send({ cmd: 'spawn', name, ms });
    return (await this.wait('child-started', { name })).pid as number;
  }

  /** Sends a turn and waits for its answer. */
  async ask(id: number, text: string): Promise<string> {
    this.send({ cmd: 'turn', id, text });
    return (await this.wait('answer', { id })).text as string;
  }
}

function matches(message: AgentMessage, field: Record<string, unknown> | undefined): boolean {
  return Object.entries(field ?? {}).every(([k, v]) => message[k] === v);
}
