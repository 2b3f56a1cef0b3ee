/**
 * npm run bench:events [-- --streams N --owners N --seconds N --rate N]: the event stream under
 * load, on the real server (a child process, NODE_ENV=production) and PostgreSQL.
 *
 * `owners` accounts, each with one friend account that holds a bucket showing the owner's front and
 * a visible member; `streams` streams open at once, half owners' and half friends'. Writers then
 * start and stop the owners' members (`rate` front writes a second in all) for `seconds`. Each
 * event is matched to the write that made it (the k-th front change of an account is its k-th
 * write), and its delay is measured from that write's response (the write has committed by then;
 * a negative delay means the event came first) and from its request. Reports p50/p99, the events
 * delivered, the server's peak RSS and its CPU per delivered event. Needs DATABASE_URL; creates
 * and drops its own database.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import {
  benchAccount,
  benchDatabase,
  call,
  percentile,
  startBenchServer,
  stopBenchServer,
  usageOf,
} from './support.ts';

const { values } = parseArgs({
  options: {
    streams: { type: 'string' },
    owners: { type: 'string' },
    seconds: { type: 'string' },
    rate: { type: 'string' },
  },
});
const STREAMS = Number(values.streams ?? 1000);
const OWNERS = Number(values.owners ?? 50);
const SECONDS = Number(values.seconds ?? 20);
const RATE = Number(values.rate ?? 20);
const log = (m: string) => process.stdout.write(`[events] ${m}\n`);

const database = benchDatabase('events');
const ADMIN_TOKEN = randomBytes(24).toString('hex');

interface Account {
  userId: string;
  auth: Record<string, string>;
}

async function main(): Promise<void> {
  await database.create();
  let server: ChildProcess | undefined;
  try {
    const launched = await startBenchServer(database.url, ADMIN_TOKEN, { EVENTS_MAX_STREAMS_PER_KEY: String(STREAMS) });
    server = launched.child;
    const { url } = launched;
    const account = (username: string): Promise<Account> => benchAccount(url, ADMIN_TOKEN, username);

    // Owners with a visible member, each with a friend holding a bucket that shows the front.
    const owners: Array<Account & { member: string }> = [];
    const friends: Account[] = [];
    for (let i = 0; i < OWNERS; i++) {
      const owner = await account(`owner${i}`);
      const friend = await account(`friend${i}`);
      await call(`${url}/api/v1/friends/${owner.userId}/request`, { method: 'POST', headers: friend.auth });
      await call(`${url}/api/v1/friends/requests/${friend.userId}/accept`, { method: 'POST', headers: owner.auth });
      const bucket = (await call(`${url}/api/v1/privacy-buckets`, {
        method: 'POST',
        headers: owner.auth,
        body: JSON.stringify({ name: 'Front', friendPermissions: { members_view: 'read', front: 'read' } }),
      })) as { _id: string };
      await call(`${url}/api/v1/privacy-buckets/assignments/friends/${friend.userId}`, {
        method: 'PUT',
        headers: owner.auth,
        body: JSON.stringify({ bucketIds: [bucket._id] }),
      });
      const member = (await call(`${url}/api/v1/members`, {
        method: 'POST',
        headers: owner.auth,
        body: JSON.stringify({ name: `Member ${i}` }),
      })) as { id: string };
      await call(`${url}/api/v1/privacy-buckets/assignments/members/${member.id}`, {
        method: 'PUT',
        headers: owner.auth,
        body: JSON.stringify({ bucketIds: [bucket._id] }),
      });
      owners.push({ ...owner, member: member.id });
      friends.push(friend);
    }
    log(`${OWNERS} owners and their friends set up`);

    /** Per account: the times of its writes' requests and responses, in order. */
    const writes = new Map<string, Array<{ sent: number; answered: number }>>();
    /** Each delivered event: its account, its place among that account's events on the stream, when it came. */
    const arrivals: Array<{ account: string; k: number; at: number }> = [];
    const controller = new AbortController();
    const open = async (auth: Record<string, string>) => {
      const res = await fetch(`${url}/api/v1/events?types=${encodeURIComponent('front.,friend.front.')}`, {
        headers: auth,
        signal: controller.signal,
      });
      if (res.status !== 200 || !res.body) throw new Error(`a stream answered ${res.status}: ${await res.text()}`);
      const seen = new Map<string, number>();
      const decoder = new TextDecoder();
      let buffer = '';
      void (async () => {
        try {
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
            const at = performance.now();
            buffer += decoder.decode(chunk, { stream: true });
            for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
              const block = buffer.slice(0, cut);
              buffer = buffer.slice(cut + 2);
              const data = /^data: (.*)$/m.exec(block)?.[1];
              if (!data) continue;
              const event = JSON.parse(data) as { accountId: string };
              const k = seen.get(event.accountId) ?? 0;
              seen.set(event.accountId, k + 1);
              arrivals.push({ account: event.accountId, k, at });
            }
          }
        } catch {
          // aborted at the end
        }
      })();
    };
    for (let i = 0; i < STREAMS; i++) {
      const owner = i % 2 === 0;
      const index = Math.floor(i / 2) % OWNERS;
      await open(owner ? owners[index]!.auth : friends[index]!.auth);
    }
    log(`${STREAMS} streams open`);
    await new Promise((r) => setTimeout(r, 1000));

    const before = usageOf(server.pid!);
    const started = performance.now();
    const perOwnerGap = (1000 * OWNERS) / RATE;
    let writeCount = 0;
    await Promise.all(
      owners.map(async (owner, i) => {
        await new Promise((r) => setTimeout(r, (i * perOwnerGap) / OWNERS));
        const list: Array<{ sent: number; answered: number }> = [];
        writes.set(owner.userId, list);
        for (let k = 0; performance.now() - started < SECONDS * 1000; k++) {
          const sent = performance.now();
          const entry = { sent, answered: Number.NaN };
          list.push(entry);
          await call(k % 2 === 0 ? `${url}/api/v1/front/members` : `${url}/api/v1/front/members/${owner.member}`, {
            method: k % 2 === 0 ? 'POST' : 'DELETE',
            headers: owner.auth,
            ...(k % 2 === 0 ? { body: JSON.stringify({ memberId: owner.member }) } : {}),
          });
          entry.answered = performance.now();
          writeCount++;
          const next = sent + perOwnerGap - performance.now();
          if (next > 0) await new Promise((r) => setTimeout(r, next));
        }
      }),
    );
    await new Promise((r) => setTimeout(r, 2000));
    const after = usageOf(server.pid!);
    controller.abort();
    const fromAnswer: number[] = [];
    const fromRequest: number[] = [];
    let unmatched = 0;
    for (const { account, k, at } of arrivals) {
      const write = writes.get(account)?.[k];
      if (!write) {
        unmatched++;
        continue;
      }
      fromAnswer.push(at - write.answered);
      fromRequest.push(at - write.sent);
    }
    const delivered = arrivals.length;
    const a = fromAnswer.sort((x, y) => x - y);
    const q = fromRequest.sort((x, y) => x - y);
    const expectedEvents = writeCount * (STREAMS / OWNERS);
    log(`${writeCount} writes, ${delivered} events delivered (${expectedEvents} expected), ${unmatched} unmatched`);
    const ms = (n: number) => n.toFixed(1);
    process.stdout.write(
      [
        '',
        `Event stream: ${STREAMS} streams (half owners', half friends'), ${OWNERS} owners, ${writeCount} front writes in ${SECONDS} s (PostgreSQL, a server of its own):`,
        '',
        "| events delivered | expected | delay from the write's answer, p50 / p99 ms | from its request, p50 / p99 ms | server peak RSS before → after, MB | server CPU per delivered event, ms |",
        '|---|---|---|---|---|---|',
        `| ${delivered} | ${expectedEvents} | ${ms(percentile(a, 50))} / ${ms(percentile(a, 99))} | ${ms(percentile(q, 50))} / ${ms(percentile(q, 99))} | ${before.peakMb} → ${after.peakMb} | ${((after.cpuMs - before.cpuMs) / Math.max(1, delivered)).toFixed(3)} |`,
        '',
      ].join('\n'),
    );
  } finally {
    await stopBenchServer(server);
    await database.drop();
  }
}

await main();
