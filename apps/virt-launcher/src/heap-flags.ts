// Imported first by main.ts (ES modules evaluate in import order): V8 settings that keep the
// launcher's own memory small. It does little CPU work, so no optimizing compiler is needed (lite
// mode) and a small young generation suffices. KVTS_LAUNCHER_V8_FLAGS overrides ('' disables).
import v8 from 'node:v8';

const flags = process.env.KVTS_LAUNCHER_V8_FLAGS ?? '--max-semi-space-size=1 --lite-mode';
for (const f of flags.split(/\s+/).filter(Boolean)) v8.setFlagsFromString(f);
