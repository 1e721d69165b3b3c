// An example integration: a small Node.js table service that runs rounds of Gnau for one table
// through the dealer, the way docs/integration.md says to.
//
//   GNAU_TOKEN=<operator token> node table-service.mjs --target 127.0.0.1:50051 --table t-1 \
//       --rounds 3 [--receipts DIR] [--max-attempts 8]
//
// It loads proto/gnau/v1/*.proto at run time (@grpc/proto-loader, no generated code), puts its
// table in the operator's catalogue (PutTable: a round is dealt only at a catalogued table), and
// for each round:
//   1. Shuffle, and show the commitment to the table before any bet is taken;
//   2. take the bets (here: three made-up players), then Deal them: the bets are now locked;
//   3. Reveal, then Settle, and pay out each seat's delta;
//   4. fetch the round's receipt (GetRoundReceipt) for the players to verify offline.
// Every change has its own request id (a UUID4), chosen once and kept across retries; a call
// that fails with UNAVAILABLE or DEADLINE_EXCEEDED is retried with the same request id after an
// exponential, jittered backoff. A table left busy by an earlier run (TABLE_BUSY) has its
// unfinished round voided first. One JSON object per line on stdout, one per event.

import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

const { values: options } = parseArgs({
  options: {
    target: { type: 'string', default: process.env.GNAU_TARGET || '127.0.0.1:50051' },
    table: { type: 'string', default: 'table-1' },
    rounds: { type: 'string', default: '1' },
    receipts: { type: 'string' },
    'max-attempts': { type: 'string', default: '8' },
    'deadline-ms': { type: 'string', default: '5000' },
    proto: { type: 'string', default: fileURLToPath(new URL('../../proto/', import.meta.url)) },
  },
});
const TOKEN = process.env.GNAU_TOKEN;
const MAX_ATTEMPTS = Number(options['max-attempts']);
const DEADLINE_MS = Number(options['deadline-ms']);
const INITIAL_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 2000;
/**
 * What the table deals under (docs/api.md, "Tables"): euro stakes of 1 cent to 100 euro, the
 * default house rules (the Shuffle's), at most 6 seats, the dealer's own deadlines.
 */
const TABLE_CONFIG = {
  currency: 'EUR', rule_sets: [{}], min_stake: '1', max_stake: '10000', max_seats: 6, enabled: true,
};
/** Status codes after which the outcome of a change is unknown: retry with the same request id. */
const RETRYABLE = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]);

const definition = protoLoader.loadSync(['gnau/v1/dealer.proto'], {
  includeDirs: [options.proto],
  keepCase: true,
  longs: String, // stakes and deltas are int64: keep them exact, as decimal strings
  enums: String,
  defaults: true,
});
const { DealerService } = grpc.loadPackageDefinition(definition).gnau.v1;
const dealer = new DealerService(options.target, grpc.credentials.createInsecure());

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One unary call with the operator's token and a deadline, as a promise. */
function callOnce(method, request) {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${TOKEN}`);
  return new Promise((resolve, reject) => {
    dealer[method](request, metadata, { deadline: Date.now() + DEADLINE_MS }, (error, response) =>
      error ? reject(error) : resolve(response));
  });
}

/**
 * A call retried on UNAVAILABLE and DEADLINE_EXCEEDED, the request (and so its request id)
 * unchanged: the dealer answers a repeated request with its first answer and changes nothing.
 * Waits between attempts grow 0.1 s, 0.2 s, 0.4 s, ... up to 2 s, half of each at random.
 */
async function call(method, request) {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await callOnce(method, request);
    } catch (error) {
      if (!RETRYABLE.has(error.code) || attempt >= MAX_ATTEMPTS) throw error;
      const cap = Math.min(MAX_BACKOFF_MS, INITIAL_BACKOFF_MS * 2 ** (attempt - 1));
      const wait = Math.round(cap / 2 + Math.random() * (cap / 2));
      emit({ event: 'retry', method, attempt, code: grpc.status[error.code], wait_ms: wait });
      await sleep(wait);
    }
  }
}

// -- the ErrorInfo of a refusal -------------------------------------------------------------

// google.rpc.Status and ErrorInfo, decoded with protobufjs (the library proto-loader uses);
// Any is declared by its wire format, which is all the decoding needs.
const { root: rpc } = protobuf.parse(`
  syntax = "proto3";
  package google.rpc;
  message Any { string type_url = 1; bytes value = 2; }
  message Status { int32 code = 1; string message = 2; repeated Any details = 3; }
  message ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
`, { keepCase: true });
const Status = rpc.lookupType('google.rpc.Status');
const ErrorInfo = rpc.lookupType('google.rpc.ErrorInfo');

/**
 * The google.rpc.ErrorInfo of a refused call ({reason, domain, metadata}), from the status
 * details the dealer puts in the grpc-status-details-bin trailer; null if there is none (a
 * status gRPC itself produced).
 */
function errorInfo(error) {
  const [details] = error.metadata?.get('grpc-status-details-bin') ?? [];
  if (!details) return null;
  const any = Status.decode(details).details
    .find((detail) => detail.type_url === 'type.googleapis.com/google.rpc.ErrorInfo');
  return any ? ErrorInfo.toObject(ErrorInfo.decode(any.value), { defaults: true }) : null;
}

// -- a round --------------------------------------------------------------------------------

/** Shuffle on the table; a round an earlier run left unfinished there is voided first. */
async function shuffle(table) {
  const request = { request_id: randomUUID(), table_id: table, house_rules: {} };
  try {
    return (await call('Shuffle', request)).round;
  } catch (error) {
    const info = errorInfo(error);
    if (info?.reason !== 'TABLE_BUSY') throw error;
    const { round_id: unfinished, state } = info.metadata;
    await call('VoidRound', {
      request_id: randomUUID(),
      round_id: unfinished,
      reason_code: 'VOID_REASON_PLATFORM_FAILURE',
      reason: 'left unfinished by an earlier run of the table service',
    });
    emit({ event: 'voided_unfinished', round_id: unfinished, state });
    return (await call('Shuffle', request)).round; // the same request: its id was never used
  }
}

/** The bets of the round: in a real service, what the players placed while betting was open. */
function takeBets(number) {
  return [1, 2, 3].map((seat) => ({
    seat_number: seat,
    player_id: `player-${seat}`,
    stake: String(100 * seat + number),
  }));
}

async function playRound(table, number) {
  const shuffled = await shuffle(table);
  const roundId = shuffled.round_id;
  // Shown to the players before any bet: it binds the dealer to its seed.
  emit({ event: 'commitment', round_id: roundId, commitment: shuffled.commitment });

  const seats = takeBets(number);
  emit({ event: 'bets_locked', round_id: roundId, seats });
  const dealt = (await call('Deal', { request_id: randomUUID(), round_id: roundId, seats })).round;
  emit({ event: 'dealt', round_id: roundId, hands: dealt.hands, dealer_hand: dealt.dealer_hand });

  const revealed = (await call('Reveal', { request_id: randomUUID(), round_id: roundId })).round;
  emit({ event: 'revealed', round_id: roundId, server_seed: revealed.server_seed });

  const settled = (await call('Settle', { request_id: randomUUID(), round_id: roundId })).round;
  const results = settled.settlement.seat_results.map((result) => ({
    seat: result.seat_number,
    outcome: result.outcome.replace(/^OUTCOME_/, ''),
    delta: result.delta,
  }));
  const dealerDelta = settled.settlement.dealer_delta;
  const sum = results.reduce((total, result) => total + BigInt(result.delta), BigInt(dealerDelta));
  emit({ event: 'settled', round_id: roundId, results, dealer_delta: dealerDelta, sum: String(sum) });

  const { receipt } = await call('GetRoundReceipt', { round_id: roundId, pinned_size: '0' });
  let path = null;
  if (options.receipts) {
    mkdirSync(options.receipts, { recursive: true });
    path = join(options.receipts, `${roundId}.json`);
    writeFileSync(path, receipt);
  }
  emit({ event: 'receipt', round_id: roundId, path, bytes: Buffer.byteLength(receipt) });
}

async function main() {
  if (!TOKEN) {
    process.stderr.write('table-service: set GNAU_TOKEN to an operator token\n');
    return 2;
  }
  try {
    // Idempotent, so safe at every start and to retry: the same configuration changes nothing.
    const { table } = await call('PutTable', { table_id: options.table, config: TABLE_CONFIG });
    emit({ event: 'table', table_id: table.table_id, version: table.version });
    for (let number = 1; number <= Number(options.rounds); number += 1) {
      await playRound(options.table, number);
    }
  } catch (error) {
    const info = errorInfo(error);
    const reason = info ? ` (${info.reason})` : '';
    process.stderr.write(`table-service: ${grpc.status[error.code] ?? 'ERROR'}${reason}: ${error.details ?? error.message}\n`);
    return 1;
  } finally {
    dealer.close();
  }
  return 0;
}

process.exitCode = await main();
