// Type definitions for a small HTTP client.

export interface RequestOptions {
  readonly method: string;
  readonly url: string;
  readonly headers?: Record<string, string>;
  timeout?: number;
  body?: string | Uint8Array;
}

export interface Response<T = unknown> {
  readonly status: number;
  readonly statusText: string;
  readonly data: T;
  readonly headers: Readonly<Record<string, string>>;
}

export declare class Client {
  readonly baseURL: string;
  private readonly retries;
  static readonly version: string;
  constructor(baseURL: string, options?: Partial<RequestOptions>);
  request<T>(options: RequestOptions): Promise<Response<T>>;
  get<T>(url: string): Promise<Response<T>>;
  post<T>(url: string, body: unknown): Promise<Response<T>>;
}

export declare function create(baseURL: string): Client;
export declare function isClientError(err: unknown): err is ClientError;

export interface ClientError extends Error {
  readonly code: string;
  readonly response?: Response;
}

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
export declare const defaults: { readonly timeout: number; retries: number };
