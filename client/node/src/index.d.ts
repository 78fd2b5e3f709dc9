// Type declarations for bandit-client (src/index.js). Messages follow @grpc/proto-loader's
// conversion of proto/bandit/v1/*.proto: camelCase fields, int64 as decimal strings (numbers
// accepted on input), enums as their names, oneofs also named by a string field.
import type { ChannelCredentials, ClientOptions } from '@grpc/grpc-js';
import type { ArmSpec, PolicyConfig } from './policy_config';

export type Int64 = string;
export type Int64Input = string | number;

/** gRPC status codes (numbers), as in @grpc/grpc-js. */
export declare const Status: typeof import('@grpc/grpc-js').status;

export declare class BanditError extends Error {
  constructor(details: string, code?: number, attempts?: number);
  /** Numeric gRPC status code. */
  readonly code: number;
  /** e.g. 'NOT_FOUND'. */
  readonly codeName: string;
  /** The server's (or the client's) message. */
  readonly details: string;
  /** Attempts sent (0 when the deadline had passed before the first). */
  readonly attempts: number;
}
export declare class InvalidArgumentError extends BanditError {}
export declare class NotFoundError extends BanditError {}
export declare class AlreadyExistsError extends BanditError {}
export declare class FailedPreconditionError extends BanditError {}
export declare class ResourceExhaustedError extends BanditError {}
export declare class UnavailableError extends BanditError {}
export declare class DeadlineExceededError extends BanditError {}
export declare class PermissionDeniedError extends BanditError {}
export declare class UnauthenticatedError extends BanditError {}
export declare class CancelledError extends BanditError {}
export declare class InternalError extends BanditError {}
export declare class UnimplementedError extends BanditError {}
export declare function errorForCode(code: number, details: string, attempts?: number): BanditError;

export interface RetryPolicy {
  /** Attempts in all (1 = no retries). Default 4. */
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
}
export declare const DEFAULT_RETRY: Readonly<RetryPolicy>;

export interface ClientConstructorOptions {
  /** Default deadline of each call in ms, covering its retries; null = none. Default 5000. */
  timeoutMs?: number | null;
  /** Retries for UNAVAILABLE only; null = a single attempt. */
  retry?: Partial<RetryPolicy> | null;
  credentials?: ChannelCredentials;
  /** grpc-js client options (channel arguments, interceptors, ...). */
  channelOptions?: ClientOptions;
  /** Where proto/ is; default $BANDIT_PROTO_DIR or the repository's proto/. */
  protoDir?: string;
}

export interface CallOptions {
  /** Overrides the client's timeoutMs for this call. */
  timeoutMs?: number | null;
  /** Absolute deadline (wins over timeoutMs). */
  deadline?: Date | number;
  retry?: Partial<RetryPolicy>;
}

/** bandit.v1.PolicyConfig and the configs of every policy: generated from the protos. */
export * from './policy_config';
export interface PendingConfig {
  capacity?: Int64Input;
  rewardWaitMs?: Int64Input;
  onExpiry?: 'EXPIRY_ACTION_UNSPECIFIED' | 'APPLY_DEFAULT' | 'DROP';
  defaultReward?: number;
  rewardAggregation?: RewardAggregation;
}
export type RewardAggregation = 'REWARD_AGGREGATION_UNSPECIFIED' | 'EARLIEST' | 'SUM';
/** ONLINE: the policy's decisions are served and learned; APPRENTICE: the baseline is served and
 *  the policy learns it as logged data; LOGGING_ONLY: the baseline is served, nothing learned. */
export type LearningMode = 'LEARNING_MODE_UNSPECIFIED' | 'ONLINE' | 'APPRENTICE' | 'LOGGING_ONLY';
export interface InstanceConfig {
  policy?: PolicyConfig; seed?: Int64Input; pending?: PendingConfig;
  decisionLog?: object;
  featureSpace?: FeatureSpaceConfig;
  learningMode?: LearningMode;
}
/** The settings ConfigureInstance changes live; each one given replaces the instance's. */
export interface InstanceSettings {
  rewardWaitMs?: Int64Input;
  onExpiry?: 'APPLY_DEFAULT' | 'DROP';
  defaultReward?: number;
  rewardAggregation?: RewardAggregation;
  epsilon?: number;
  learningMode?: LearningMode;
}
export interface Estimate { value: number; se: number; lo: number; hi: number }
/** APPRENTICE mode: the policy's estimated value against the served baseline's. */
export interface ApprenticeStatus {
  events: Int64; rewardSum: number; baseline: Estimate; ips: Estimate; snips: Estimate;
  policyChoseBaseline: Int64; imitatedRewardSum: number; effectiveSampleSize: number;
}
/** Named features hashed as Vowpal Wabbit does: weight space 2^bits, interactions like 'UA', '::'. */
export interface FeatureSpaceConfig {
  bits: number; interactions?: string[]; hashSeed?: number; noConstant?: boolean; ignore?: string;
  version?: number;
}

export interface InstanceStats {
  rounds: Int64; updates: Int64; pending: Int64; expired: Int64; rejectedRewards: Int64;
  stateBytes: Int64; rewardSum: number; pseudoRegret: number; estimatedRegret: number;
}
export interface Instance {
  name: string;
  config: InstanceConfig;
  stats: InstanceStats;
  summary: Record<string, number>;
  armIds: string[];
  weights: number[];
  apprentice?: ApprenticeStatus | null;
}
export interface ListInstancesResponse { instances: Instance[]; nextPageToken: string }

export type ScoreKind = 'SCORE_KIND_UNSPECIFIED' | 'UPPER_CONFIDENCE_BOUND' | 'PROBABILITY'
  | 'ESTIMATED_MEAN' | 'POSTERIOR_SAMPLE' | 'PREDICTED_COST';
export interface Decision {
  eventId: string;
  armIndex: number;
  armId: string;
  propensity: number;
  scores: number[];
  scoreKind: ScoreKind;
  prediction?: number;
  diagnostics: Record<string, number>;
  expiresAtMs: Int64;
  /** Named actions: the chosen action's id (armIndex is its position in `actions`). */
  actionId: string;
  /** Named actions with returnScores: every action, the chosen first (Personalizer's ranking). */
  ranking: Array<{ id: string; probability: number }>;
  /** With explain: the chosen action's features as hashed (VW's audit names) and their weights. */
  explanation: Array<{ name: string; index: number; value: number; weight: number }>;
  /** Multi-slot decisions: each slot's choice, in the request's order. */
  slots: SlotDecision[];
}
export interface SlotDecision {
  slotId: string;
  armIndex: number;
  actionId: string;
  /** Probability of this choice given the earlier slots' choices. */
  propensity: number;
  ranking: Array<{ id: string; probability: number }>;
}
export interface Slot {
  id: string;
  /** Named inputs: the slot's own features. */
  features?: object | object[] | string;
  /** Dense candidates: appended to every candidate for this slot. */
  denseFeatures?: number[];
  excludedActions?: string[];
  baselineAction?: string;
}
export interface UpdateResponse { updates: Int64 }

export interface SelectParams {
  /** Contextual policies: one feature vector per candidate arm. */
  candidates?: Array<number[] | { values: number[] }>;
  /** Point-input policies: the input x. */
  x?: number[];
  returnScores?: boolean;
  /** Named features (an instance with a featureSpace): the context shared by every action,
   *  as an object (or JSON text); nested objects are namespaces. */
  context?: object | object[] | string;
  /** Named actions, each with an id and its own features. */
  actions?: NamedAction[];
  /** Ids of actions not to choose now. */
  excludedActions?: string[];
  /** Also return the chosen action's hashed features with their weights (Decision.explanation). */
  explain?: boolean;
  /** The decision's event id, chosen by the caller (at most 256 letters, digits and . _ : ~ -);
   *  refused (ALREADY_EXISTS) while a decision with that id awaits its reward. */
  eventId?: string;
  /** A multi-slot decision: the slots, filled in order. */
  slots?: Slot[];
  /** Not learned from until activate(instance, eventId). */
  deferActivation?: boolean;
}
export interface NamedAction { id: string; features?: object | object[] | string }
export interface DirectObservation {
  armId?: string; features?: number[]; x?: number[];
  /** Named features: the context and the played action. */
  context?: object | object[] | string; action?: NamedAction;
}
export interface UpdateParams {
  /** The Decision's eventId (or give `direct`). */
  eventId?: string;
  /** Multi-slot decisions: the slot the reward is for. */
  slotId?: string;
  direct?: DirectObservation;
  reward: number;
  embedding?: number[];
  fidelity?: number;
  bestExpectedReward?: number;
  expectedReward?: number;
}
/** One request on a Rounds stream, as sent on the wire: a SelectRequest, UpdateRequest or
 *  ActivateRequest object (camelCase fields, `instance` included; candidates as {values}). */
export type RoundRequest =
  | { select: { instance: string } & Record<string, unknown> }
  | { update: { instance: string } & Record<string, unknown> }
  | { activate: { instance: string; eventId: string } };
/** The answer to the RoundRequest at the same position: `result` names the field set, or, when
 *  the request was refused, `status` holds the unary call's code and message (no result). */
export interface RoundResponse {
  result?: 'decision' | 'update' | 'activate';
  decision?: Decision | null;
  update?: UpdateResponse | null;
  activate?: {} | null;
  status: { code: number; message: string } | null;
}
/** A Rounds stream (BanditService.Rounds): Select, Update and Activate on one long-lived call,
 *  answered in the order sent; a refusal is answered in place and the stream goes on. */
export declare class RoundStream {
  /** Requests sent whose answer was not received yet. */
  readonly unanswered: number;
  /** Sends without waiting for the answer; throws the stream's typed error if it ended. */
  send(request: RoundRequest): void;
  sendSelect(instance: string, req?: SelectParams): void;
  sendUpdate(instance: string, req: UpdateParams): void;
  sendActivate(instance: string, eventId: string): void;
  /** The answer to the oldest request sent and not yet answered, as it came. */
  receive(): Promise<RoundResponse>;
  /** receive() unwrapped; rejects with the typed error of a refusal. */
  receiveResult(): Promise<Decision | UpdateResponse | {}>;
  /** One request and its answer (rejecting as the unary call would); FailedPreconditionError
   *  while answers to earlier send*() calls are still to be received. */
  select(instance: string, req?: SelectParams): Promise<Decision>;
  update(instance: string, req: UpdateParams): Promise<UpdateResponse>;
  activate(instance: string, eventId: string): Promise<{}>;
  /** Closes the sending side, drops the answers still due; rejects unless the stream ended OK. */
  close(): Promise<void>;
  /** Ends the stream at once. */
  cancel(): void;
}
/** The typed error of a refused RoundResponse, or null. */
export declare function roundError(answer: RoundResponse): BanditError | null;
/** The result of a RoundResponse; throws the typed error of a refusal. */
export declare function roundResult(answer: RoundResponse): Decision | UpdateResponse | {} | null;

export type BatchItem<T> = { ok: true; value: T } | { ok: false; error: BanditError };

export declare class BanditClient {
  constructor(target: string, options?: ClientConstructorOptions);
  timeoutMs: number | null;
  retry: RetryPolicy;
  close(): void;

  createInstance(name: string, config?: InstanceConfig, opts?: CallOptions): Promise<Instance>;
  getInstance(name: string, opts?: CallOptions): Promise<Instance>;
  listInstances(page?: { pageSize?: number; pageToken?: string }, opts?: CallOptions): Promise<ListInstancesResponse>;
  instances(page?: { pageSize?: number }, opts?: CallOptions): AsyncGenerator<Instance, void, undefined>;
  deleteInstance(name: string, opts?: CallOptions): Promise<void>;
  resetInstance(name: string, opts?: CallOptions): Promise<Instance>;
  addArms(name: string, arms: Array<string | ArmSpec>, opts?: CallOptions): Promise<Instance>;
  removeArms(name: string, armIds: string[], opts?: CallOptions): Promise<Instance>;
  addShadow(name: string, shadow: string, config: object, opts?: CallOptions): Promise<Instance>;
  removeShadow(name: string, shadow: string, opts?: CallOptions): Promise<Instance>;
  promoteShadow(name: string, shadow: string, opts?: CallOptions): Promise<Instance>;
  configureInstance(name: string, settings: InstanceSettings, opts?: CallOptions): Promise<Instance>;

  select(instance: string, req?: SelectParams, opts?: CallOptions): Promise<Decision>;
  update(instance: string, req: UpdateParams, opts?: CallOptions): Promise<UpdateResponse>;
  activate(instance: string, eventId: string, opts?: CallOptions): Promise<{}>;
  selectBatch(items: Array<SelectParams & { instance: string }>, opts?: CallOptions): Promise<Array<BatchItem<Decision>>>;
  updateBatch(items: Array<UpdateParams & { instance: string }>, opts?: CallOptions): Promise<Array<BatchItem<UpdateResponse>>>;

  /** A Rounds stream; `instance` (optional) is sent as the routing header x-bandit-instance. */
  openRoundStream(instance?: string): RoundStream;

  /** grpc.health.v1 status: 'SERVING', 'NOT_SERVING', ... */
  health(service?: string, opts?: CallOptions): Promise<string>;
}

export declare function defaultProtoDir(): string;
/** The package version, equal to the banditd release it ships with. */
export declare const version: string;
export declare function loadProtos(protoDir?: string): { protoDir: string; BanditService: unknown; Health: unknown };
