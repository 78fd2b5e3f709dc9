'use strict';
// Typed errors for banditd's gRPC status codes. Every failed call rejects with a BanditError
// subclass carrying `code` (the numeric gRPC status), `codeName` ('NOT_FOUND', ...), `details`
// (the server's message) and `attempts` (how many attempts were sent).

const { status: Status } = require('@grpc/grpc-js');

const CODE_NAMES = Object.fromEntries(Object.entries(Status).map(([name, num]) => [num, name]));

class BanditError extends Error {
  /**
   * @param {string} details the server's (or the client's) message
   * @param {number} [code] numeric gRPC status code
   * @param {number} [attempts]
   */
  constructor(details, code = Status.UNKNOWN, attempts = 1) {
    const codeName = CODE_NAMES[code] || 'UNKNOWN';
    super(`${codeName}: ${details}`);
    this.name = new.target.name;
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.attempts = attempts;
  }
}

const make = (name, code) => {
  const cls = class extends BanditError {
    constructor(details, _code = code, attempts = 1) { super(details, code, attempts); }
  };
  Object.defineProperty(cls, 'name', { value: name });
  cls.code = code;
  return cls;
};

const InvalidArgumentError = make('InvalidArgumentError', Status.INVALID_ARGUMENT);
const NotFoundError = make('NotFoundError', Status.NOT_FOUND);
const AlreadyExistsError = make('AlreadyExistsError', Status.ALREADY_EXISTS);
const FailedPreconditionError = make('FailedPreconditionError', Status.FAILED_PRECONDITION);
const ResourceExhaustedError = make('ResourceExhaustedError', Status.RESOURCE_EXHAUSTED);
const UnavailableError = make('UnavailableError', Status.UNAVAILABLE);
const DeadlineExceededError = make('DeadlineExceededError', Status.DEADLINE_EXCEEDED);
const PermissionDeniedError = make('PermissionDeniedError', Status.PERMISSION_DENIED);
const UnauthenticatedError = make('UnauthenticatedError', Status.UNAUTHENTICATED);
const CancelledError = make('CancelledError', Status.CANCELLED);
const InternalError = make('InternalError', Status.INTERNAL);
const UnimplementedError = make('UnimplementedError', Status.UNIMPLEMENTED);

const BY_CODE = new Map([
  InvalidArgumentError, NotFoundError, AlreadyExistsError, FailedPreconditionError,
  ResourceExhaustedError, UnavailableError, DeadlineExceededError, PermissionDeniedError,
  UnauthenticatedError, CancelledError, InternalError, UnimplementedError,
].map((cls) => [cls.code, cls]));

/**
 * The typed error for a numeric gRPC status code (also used for batch item statuses).
 * @param {number} code
 * @param {string} details
 * @param {number} [attempts]
 * @returns {BanditError}
 */
function errorForCode(code, details, attempts = 1) {
  const cls = BY_CODE.get(code);
  return cls ? new cls(details, code, attempts) : new BanditError(details, code, attempts);
}

module.exports = {
  Status, BanditError, InvalidArgumentError, NotFoundError, AlreadyExistsError,
  FailedPreconditionError, ResourceExhaustedError, UnavailableError, DeadlineExceededError,
  PermissionDeniedError, UnauthenticatedError, CancelledError, InternalError, UnimplementedError,
  errorForCode,
};
