/**
 * The errors of leaseq: one class per problem `code` the service answers with
 * (application/problem+json, RFC 9457), each carrying the answer's status, code,
 * detail and, where the service says when to come back, `retryAfterS`.
 *
 * A caller tells them apart with `instanceof` (`err instanceof LeaseLost`) or by
 * `err.code`; a code this client does not know yet is an `ApiError` that keeps it.
 */

import type { components } from "./openapi.js";

/** An error answer as the document describes it. */
export type Problem = components["schemas"]["Problem"];
/** Every code the service answers with (the document's enum). */
export type ProblemCode = Problem["code"];

/** The problem+json body of an error answer, as it came (a newer service may send more). */
export type ProblemBody = Partial<Omit<Problem, "code" | "reason">> & {
  code?: string;
  reason?: string;
  [extension: string]: unknown;
};

/** What went wrong in leaseq; `status` is the HTTP status when the service answered. */
export class LeaseqError extends Error {
  /** The stable code (`lease_lost`, `unavailable`, …). */
  readonly code: string;
  /** The HTTP status of the answer; undefined when no answer came (a connection error). */
  readonly status: number | undefined;
  /** The service's explanation (or this client's, when no answer came). */
  readonly detail: string;
  /** Seconds the service asked the caller to wait (`Retry-After`), when it said. */
  readonly retryAfterS: number | undefined;
  /** The whole problem body, when the service answered one. */
  readonly problem: ProblemBody | undefined;

  constructor(
    detail: string,
    options: {
      code?: string;
      status?: number;
      retryAfterS?: number;
      problem?: ProblemBody;
      cause?: unknown;
    } = {},
  ) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? (new.target as unknown as { CODE?: string }).CODE ?? "error";
    this.status = options.status;
    this.detail = detail;
    this.retryAfterS = options.retryAfterS;
    this.problem = options.problem;
  }
}

/** 409: the lease is no longer valid (expired, swept, re-leased, completed, cancelled, wrong
 * token). Stop the work and send nothing more for it: retrying cannot help. */
export class LeaseLost extends LeaseqError {
  static readonly CODE = "lease_lost";
  /** Why, when the service knows more than "not valid": `max_runtime`. */
  get reason(): string | undefined {
    const reason = this.problem?.reason;
    return typeof reason === "string" ? reason : undefined;
  }
}
/** 404: no such lead (or one outside the token's sessions), schedule or token. */
export class NotFound extends LeaseqError {
  static readonly CODE = "not_found";
}
/** 422: the input is invalid; nothing was written. */
export class ValidationError extends LeaseqError {
  static readonly CODE = "validation_error";
}
/** 409: the lead is not in a status that allows this (cancel a finished lead, retry a live one). */
export class Conflict extends LeaseqError {
  static readonly CODE = "conflict";
}
/** 401: the service wants a valid bearer token. */
export class Unauthorized extends LeaseqError {
  static readonly CODE = "unauthorized";
}
/** 403: the token may not do this, or not in this session. */
export class Forbidden extends LeaseqError {
  static readonly CODE = "forbidden";
}
/** 413 (and 431): the request, or its head, is larger than the service accepts. */
export class PayloadTooLarge extends LeaseqError {
  static readonly CODE = "payload_too_large";
}
/** 415: a body that is not application/json. */
export class UnsupportedMediaType extends LeaseqError {
  static readonly CODE = "unsupported_media_type";
}
/** 429: the session holds as many queued leads as its `max_queued` allows; nothing of the push
 * was stored. `retryAfterS` says when to try again. */
export class QuotaExceeded extends LeaseqError {
  static readonly CODE = "quota_exceeded";
}
/** 503 (or no answer at all): the service or its database cannot be reached now; retried with
 * backoff by the client before it is thrown. */
export class Unavailable extends LeaseqError {
  static readonly CODE = "unavailable";
}
/** 400: the request body ended before its Content-Length; nothing was done. */
export class IncompleteBody extends LeaseqError {
  static readonly CODE = "incomplete_body";
}
/** 405: the route has no such method. */
export class MethodNotAllowed extends LeaseqError {
  static readonly CODE = "method_not_allowed";
}
/** 500: a fault of the service's own (none is answered to any input: a bug to report). */
export class InternalError extends LeaseqError {
  static readonly CODE = "internal_error";
}
/** An error answer whose code has no class of its own here (its `code` is the service's). */
export class ApiError extends LeaseqError {
  static readonly CODE = "api_error";
}

/** `verifyFence`: the fence is malformed, of an unknown version, or signed by none of the keys. */
export class FenceInvalid extends LeaseqError {
  static readonly CODE = "fence_invalid";
}

type ErrorClass = new (detail: string, options?: ConstructorParameters<typeof LeaseqError>[1]) => LeaseqError;

// One class per code of the document: a code added there without a class here fails the build.
const CLASSES: { readonly [code in ProblemCode]: ErrorClass } = {
  lease_lost: LeaseLost,
  not_found: NotFound,
  validation_error: ValidationError,
  conflict: Conflict,
  incomplete_body: IncompleteBody,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  payload_too_large: PayloadTooLarge,
  unsupported_media_type: UnsupportedMediaType,
  quota_exceeded: QuotaExceeded,
  unavailable: Unavailable,
  method_not_allowed: MethodNotAllowed,
  internal_error: InternalError,
};
const BY_CODE: ReadonlyMap<string, ErrorClass> = new Map(Object.entries(CLASSES));

// An answer without a problem body (a proxy's page): the class its status stands for.
const BY_STATUS: ReadonlyMap<number, ErrorClass> = new Map<number, ErrorClass>([
  [401, Unauthorized],
  [403, Forbidden],
  [404, NotFound],
  [405, MethodNotAllowed],
  [413, PayloadTooLarge],
  [415, UnsupportedMediaType],
  [422, ValidationError],
  [429, QuotaExceeded],
  [431, PayloadTooLarge],
  [502, Unavailable],
  [503, Unavailable],
  [504, Unavailable],
]);

/** The error of an answer with `status`, its body (parsed JSON, or text) and `Retry-After`. */
export function errorOf(status: number, body: unknown, retryAfterS?: number): LeaseqError {
  const problem: ProblemBody | undefined =
    body !== null && typeof body === "object" && !Array.isArray(body) ? (body as ProblemBody) : undefined;
  const code = typeof problem?.code === "string" ? problem.code : undefined;
  const text = typeof body === "string" ? body.slice(0, 500) : undefined;
  const detail =
    (typeof problem?.detail === "string" && problem.detail) ||
    (typeof problem?.title === "string" && problem.title) ||
    text ||
    `HTTP ${status}`;
  const cls = (code !== undefined ? BY_CODE.get(code) : undefined) ?? BY_STATUS.get(status) ?? ApiError;
  return new cls(detail, {
    code: code ?? (cls === ApiError ? `http_${status}` : undefined),
    status,
    ...(retryAfterS === undefined ? {} : { retryAfterS }),
    ...(problem === undefined ? {} : { problem }),
  });
}
