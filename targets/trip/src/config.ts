// Configuration from the environment. The harness fills every setting from
// the manifest's env templates; a missing or malformed one is a ConfigError,
// which main turns into exit code 2 ("the target could not start"), never a
// crash that looks like a verdict.

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function env(name: string): string {
  const v = (process.env[name] ?? '').trim();
  if (v === '') throw new ConfigError(`${name} is not set`);
  return v;
}

export function envOr(name: string, fallback: string): string {
  const v = (process.env[name] ?? '').trim();
  return v === '' ? fallback : v;
}

/** Parses Go-style durations ("2s", "500ms", "1m", "1.5s") into milliseconds. */
export function parseDuration(s: string): number {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let i = 0;
  while (i < s.length) {
    re.lastIndex = i;
    const m = re.exec(s);
    if (m === null) throw new Error(`bad duration ${JSON.stringify(s)} (want e.g. 500ms, 2s, 1m)`);
    total += Number(m[1]) * unit[m[2] as string]!;
    i = re.lastIndex;
  }
  if (s.length === 0) throw new Error('empty duration');
  return total;
}

export function envDuration(name: string, fallbackMs: number): number {
  const v = (process.env[name] ?? '').trim();
  if (v === '') return fallbackMs;
  try {
    const ms = parseDuration(v);
    if (ms <= 0) throw new Error('not positive');
    return ms;
  } catch {
    throw new ConfigError(`${name}=${JSON.stringify(v)}: want a positive duration like 2s`);
  }
}

export function envInt(name: string, fallback: number): number {
  const v = (process.env[name] ?? '').trim();
  if (v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new ConfigError(`${name}=${JSON.stringify(v)}: want a positive integer`);
  return n;
}

/** The instance name the harness gave this process (relay-2), or the service name. */
export function instanceName(fallback: string): string {
  return envOr('SAGACHAOS_INSTANCE', fallback);
}
