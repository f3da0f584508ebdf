import { fromUpstreamDomain, type DomainModel } from './upstream/domain-json.js';
import { fromUpstreamK8sEvent, type K8sEventModel } from './upstream/k8s-event.js';
import * as grpc from '@grpc/grpc-js';
import {
  NotifyService,
  type NotifyServer as GenNotifyServer,
  type Response,
} from './gen/kubevirt/notify/v1/notify.js';
import { bindUnix, CallTracker, errorMessage, stopServer, type SocketOwner } from './grpc-util.js';
import { createLogger, type Logger } from '@kubevirt-ts/log';
import { checkSocketPath, removeSocketFile } from './sockets.js';

/** Watch event types a domain event may carry. ERROR carries statusJSON (upstream sends it for watch errors). */
export const DOMAIN_EVENT_TYPES = ['ADDED', 'MODIFIED', 'DELETED', 'ERROR'] as const;
export type DomainEventType = (typeof DOMAIN_EVENT_TYPES)[number];

/** A domain event as delivered to the handler: domainJSON decoded from upstream's shape, statusJSON parsed. */
export interface DomainEvent {
  eventType: DomainEventType;
  /** The domain (domainJSON, upstream's api.Domain shape, decoded), undefined when domainJSON was empty. */
  domain: DomainModel | undefined;
  /** Parsed statusJSON, undefined when empty. */
  status?: unknown;
}

export interface NotifyServerOptions {
  /** Usually notifySocketPath(handlerDir); its directory is created 0700, the socket is 0600. */
  socketPath: string;
  /** Called once per HandleDomainEvent; a throw/rejection answers success:false with its message. */
  onDomainEvent: (event: DomainEvent) => void | Promise<void>;
  /** Called once per HandleK8sEvent with the decoded eventJSON (a core/v1 Event). */
  onK8sEvent: (event: K8sEventModel) => void | Promise<void>;
  /**
   * chown the socket and its directory to this user, so launchers running as that uid (107,
   * qemu) can connect through the 0700 directory / 0600 socket. Needs root (CAP_CHOWN).
   */
  socketOwner?: SocketOwner;
  logger?: Logger;
}

/** The handler's notify server (kubevirt.notify.v1.Notify); hands decoded events to callbacks. */
export class NotifyServer {
  readonly socketPath: string;
  private readonly opts: NotifyServerOptions;
  private readonly log: Logger;
  private server: grpc.Server | undefined;
  private tracker = new CallTracker();

  constructor(opts: NotifyServerOptions) {
    checkSocketPath(opts.socketPath);
    this.socketPath = opts.socketPath;
    this.opts = opts;
    this.log = opts.logger ?? createLogger('notify-server');
  }

  async start(): Promise<void> {
    if (this.server) throw new Error('NotifyServer: already started');
    const server = new grpc.Server();
    const impl: GenNotifyServer = {
      handleDomainEvent: (call, cb) => {
        const { domainJSON, statusJSON, eventType } = call.request;
        void this.handle('HandleDomainEvent', () => {
          if (!(DOMAIN_EVENT_TYPES as readonly string[]).includes(eventType)) {
            throw new Error(
              `eventType: must be one of ${DOMAIN_EVENT_TYPES.join(', ')}, got ${JSON.stringify(eventType)}`,
            );
          }
          const event: DomainEvent = {
            eventType: eventType as DomainEventType,
            domain: undefined,
          };
          const dj = parseJson('domainJSON', domainJSON);
          if (dj !== undefined) {
            try {
              event.domain = fromUpstreamDomain(dj);
            } catch (err) {
              throw new Error(`domainJSON: ${errorMessage(err)}`);
            }
          }
          const status = parseJson('statusJSON', statusJSON);
          if (status !== undefined) event.status = status;
          return this.opts.onDomainEvent(event);
        }).then((r) => cb(null, r));
      },
      handleK8SEvent: (call, cb) => {
        void this.handle('HandleK8sEvent', () => {
          const event = parseJson('eventJSON', call.request.eventJSON);
          if (event === undefined) throw new Error('eventJSON: missing');
          return this.opts.onK8sEvent(fromUpstreamK8sEvent(event));
        }).then((r) => cb(null, r));
      },
    };
    const tracker = new CallTracker();
    server.addService(NotifyService, tracker.wrap(impl));
    await bindUnix(server, this.socketPath, this.opts.socketOwner);
    this.server = server;
    this.tracker = tracker;
    this.log.info('notify server listening', { socket: this.socketPath });
  }

  async stop(graceMs = 5000): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await stopServer(server, this.tracker, graceMs);
    await removeSocketFile(this.socketPath).catch(() => undefined);
    this.log.info('notify server stopped', { socket: this.socketPath });
  }

  private async handle(rpc: string, fn: () => void | Promise<void>): Promise<Response> {
    try {
      await fn();
      return { success: true, message: '' };
    } catch (err) {
      const message = errorMessage(err);
      this.log.warn(`${rpc} failed: ${message}`, { reason: message });
      return { success: false, message };
    }
  }
}

function parseJson(field: string, bytes: Uint8Array): unknown {
  if (bytes.length === 0) return undefined;
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    throw new Error(`${field}: not valid JSON: ${errorMessage(err)}`);
  }
}
