/** The typed client's subscribe() (client/events.ts) against a real server: typed events, and a dropped connection resumed without a gap or a duplicate. */
import { describe, expect, it } from 'vitest';
import { type StreamMessage, SubscriptionRefused, subscribe } from '../client/index.ts';
import { useServer } from './helpers/server.ts';

const server = useServer();

/**
 * A fetch whose first stream breaks right after its first `member.created` event: the bytes after
 * that event's block are never delivered, even when the server wrote the next events in the same
 * chunk.
 */
function breakingOnce(): typeof fetch {
  let broken = false;
  return async (input, init) => {
    const res = await fetch(input, init);
    if (broken || !res.body) return res;
    broken = true;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        const sent = text.length;
        text += decoder.decode(value, { stream: true });
        const first = /event: member\.created[\s\S]*?\n\n/.exec(text);
        if (!first) return controller.enqueue(value);
        controller.enqueue(new TextEncoder().encode(text.slice(sent, first.index + first[0].length)));
        await reader.cancel();
        controller.error(new Error('connection lost'));
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
}

describe('subscribe()', () => {
  it('yields typed events, and after a dropped connection resumes from the last one', async () => {
    const user = await server.user();
    const controller = new AbortController();
    const reconnects: Array<string | undefined> = [];
    const got: StreamMessage[] = [];
    const done = (async () => {
      for await (const message of subscribe({
        baseUrl: server.baseUrl,
        apiKey: user.apiKey,
        signal: controller.signal,
        fetch: breakingOnce(),
        onReconnect: ({ lastEventId }) => reconnects.push(lastEventId),
      })) {
        got.push(message);
        if (got.length === 3) controller.abort();
      }
    })();
    // Give the stream time to open before writing.
    await new Promise((r) => setTimeout(r, 300));
    const names = ['One', 'Two', 'Three'];
    const ids: string[] = [];
    for (const name of names) ids.push((await user.api.POST('/api/v1/members', { body: { name } })).data!.id);
    await done;
    const events = got.map((m) => (m.kind === 'event' ? m.event : null));
    expect(events.map((e) => e?.type)).toEqual(['member.created', 'member.created', 'member.created']);
    expect(events.map((e) => (e && 'memberId' in e.data ? e.data.memberId : null))).toEqual(ids);
    // One reconnect, from the first event's id.
    expect(reconnects).toEqual([events[0]!.id]);
  });

  it('stops on a refusal instead of reconnecting', async () => {
    const iterator = subscribe({ baseUrl: server.baseUrl, apiKey: 'adk_not_a_key' });
    await expect(iterator.next()).rejects.toBeInstanceOf(SubscriptionRefused);
  });
});
