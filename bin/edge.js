#!/usr/bin/env node
// `edge` command shim: the sources are TypeScript run through tsx, so register its loader and hand over to the CLI.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
