export interface Listener<E> {
  (event: E): void;
}

export interface Emitter<M extends Record<string, unknown>> {
  readonly listeners: { [K in keyof M]?: Array<Listener<M[K]>> };
  on<K extends keyof M>(name: K, listener: Listener<M[K]>): this;
  off<K extends keyof M>(name: K, listener: Listener<M[K]>): this;
  emit<K extends keyof M>(name: K, event: M[K]): boolean;
}

export declare function createEmitter<M extends Record<string, unknown>>(): Emitter<M>;
