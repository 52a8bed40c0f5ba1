// A small structured logger: one JSON object per line on stderr, tagged with
// the instance, so the harness's per-process log files read like the
// reference's (log/slog JSON).

type Level = 'debug' | 'info' | 'warn' | 'error';
const order: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };

export interface Logger {
  debug(msg: string, attrs?: Record<string, unknown>): void;
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
  with(attrs: Record<string, unknown>): Logger;
}

export function newLogger(base: Record<string, unknown>, min: Level = (process.env.TRIP_LOG_LEVEL as Level) || 'info'): Logger {
  const emit = (level: Level, msg: string, attrs?: Record<string, unknown>) => {
    if (order[level] < order[min]) return;
    const line: Record<string, unknown> = { time: new Date().toISOString(), level: level.toUpperCase(), msg, ...base };
    for (const [k, v] of Object.entries(attrs ?? {})) line[k] = v instanceof Error ? v.message : v;
    process.stderr.write(JSON.stringify(line) + '\n');
  };
  return {
    debug: (m, a) => emit('debug', m, a),
    info: (m, a) => emit('info', m, a),
    warn: (m, a) => emit('warn', m, a),
    error: (m, a) => emit('error', m, a),
    with: (attrs) => newLogger({ ...base, ...attrs }, min),
  };
}

export function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
