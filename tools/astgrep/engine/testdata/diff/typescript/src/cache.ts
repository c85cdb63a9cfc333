// An in-memory cache with eviction and a registry of instances.
import { EventEmitter } from "events";

export interface CacheOptions {
  readonly limit: number;
  ttl?: number;
}

export class Cache<K, V> extends EventEmitter {
  private store = new Map<K, V>();
  private hits = 0;
  protected misses = 0;
  public name = "cache";
  readonly limit: number;
  static instances = 0;
  static readonly version = "1.0";
  private static registry = new Set<string>();
  count = 0;
  private readonly clock: () => number = Date.now;
  private lastKey?: K;
  private label: string;
  declare tag: string;

  constructor(private readonly opts: CacheOptions) {
    super();
    this.limit = opts.limit;
    this.label = "cache";
    Cache.instances++;
  }

  private evict(key: K): void {
    this.store.delete(key);
    this.emit("evict", key);
  }

  protected touch(key: K) {
    this.hits++;
    this.lastKey = key;
  }

  public get(key: K): V | undefined {
    const v = this.store.get(key);
    if (v === undefined) {
      this.misses++;
    }
    return v;
  }

  static create<K, V>(opts: CacheOptions): Cache<K, V> {
    return new Cache<K, V>(opts);
  }

  private static reset() {
    Cache.instances = 0;
  }

  async refresh(): Promise<void> {
    await Promise.resolve();
  }

  private async load(key: K): Promise<V | undefined> {
    return this.store.get(key);
  }

  set(key: K, value: V) {
    if (this.store.size >= this.limit) {
      const first = this.store.keys().next();
      if (!first.done) this.evict(first.value);
    }
    this.store.set(key, value);
  }

  get size(): number {
    return this.store.size;
  }
}

export class Flag {
  private on = false;
}

export class Plain {
  value = 1;
}

export abstract class Loader<T> {
  protected abstract fetch(url: string): Promise<T>;
  abstract readonly kind: string;
  private retries = 3;

  static from(json: string): string {
    return json;
  }

  private notify(name: string, ...args: unknown[]) {
    console.log(name, ...args);
  }

  load(url: string) {
    return this.fetch(url);
  }
}
