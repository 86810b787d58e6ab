import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// One HTTP/1.1 request on a fresh connection (swift-nio's client codec, over TLS when given),
/// waited for with a deadline on the whole exchange: connecting, sending, the answer. What
/// `watch` uses to exchange an invitation and the relay to drive Janus's HTTP API. A server
/// that accepts and never answers (or trickles) costs at most `timeoutSeconds`.
///
/// Blocking: call it from a thread that may wait (never an event loop's).
final class HTTPExchange: Sendable {
    /// The answer: status and body (up to ``maxBody`` bytes; more is an error).
    struct Answer: Sendable, Equatable {
        var status: Int
        var body: String
    }

    static let maxBody = 256 * 1024

    private let group: MultiThreadedEventLoopGroup

    /// One event loop thread for every request made through this exchange.
    init() { group = MultiThreadedEventLoopGroup(numberOfThreads: 1) }

    deinit { try? group.syncShutdownGracefully() }

    /// One request with an exchange of its own (a thread for as long as it takes).
    static func once(_ method: HTTPMethod, host: String, port: Int, path: String, body: String?, contentType: String = "text/plain",
                     tls: NIOSSLContext? = nil, timeoutSeconds: Int64) throws -> Answer {
        try HTTPExchange().request(method, host: host, port: port, path: path, body: body, contentType: contentType, tls: tls,
                                   timeoutSeconds: timeoutSeconds)
    }

    /// - Throws: NIO's errors (connection refused, TLS) or `ChannelError.connectTimeout` when the
    ///   deadline passes, `ChannelError.eof` when the server closes without a whole answer.
    func request(_ method: HTTPMethod, host: String, port: Int, path: String, body: String?, contentType: String = "text/plain",
                 tls: NIOSSLContext? = nil, timeoutSeconds: Int64) throws -> Answer {
        let loop = group.next()
        let answer = loop.makePromise(of: Answer.self)
        // Completed on every way out (a connection refused never reaches the handler; a second
        // completion is ignored).
        defer { answer.fail(ChannelError.ioOnClosedChannel) }
        let timeout = loop.scheduleTask(in: .seconds(timeoutSeconds)) { answer.fail(ChannelError.connectTimeout(.seconds(timeoutSeconds))) }
        defer { timeout.cancel() }
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.seconds(timeoutSeconds))
            .channelInitializer { channel in
                // On the channel's event loop, where the collector lives (not Sendable).
                do {
                    if let tls {
                        // The certificate must name the host (a name, or an IP address).
                        let name = host.allSatisfy({ $0.isNumber || $0 == "." || $0 == ":" }) ? nil : host
                        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: name))
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseCollector(answer))
                    return channel.eventLoop.makeSucceededVoidFuture()
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
        // Connecting has its own timeout (the same length); the answer's runs from the start.
        let channel = try bootstrap.connect(host: host, port: port).wait()
        defer { channel.close(promise: nil) }
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.add(name: "Host", value: "\(host):\(port)")
        if let body {
            head.headers.add(name: "Content-Type", value: contentType)
            head.headers.add(name: "Content-Length", value: String(body.utf8.count))
        }
        head.headers.add(name: "Connection", value: "close")
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(string: body))), promise: nil) }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        return try answer.futureResult.wait()
    }
}

/// Collects one HTTP response (status and body, up to ``HTTPExchange/maxBody``) into a promise.
private final class ResponseCollector: ChannelInboundHandler {
    // Made and used on its channel's event loop only.
    typealias InboundIn = HTTPClientResponsePart
    private let answer: EventLoopPromise<HTTPExchange.Answer>
    private var status = 0
    private var body = ""
    private var bytes = 0

    init(_ answer: EventLoopPromise<HTTPExchange.Answer>) { self.answer = answer }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = Int(head.status.code)
        case .body(let buffer):
            bytes += buffer.readableBytes
            if bytes > HTTPExchange.maxBody {
                answer.fail(HTTPAnswerTooLong())
                context.close(promise: nil)
            } else {
                body += String(buffer: buffer)
            }
        case .end where status == 0: answer.fail(ChannelError.eof)  // no response head: not an HTTP answer
        case .end: answer.succeed(HTTPExchange.Answer(status: status, body: body))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        answer.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        answer.fail(ChannelError.eof)  // no effect once answered
    }
}

/// An answer over ``HTTPExchange/maxBody``.
struct HTTPAnswerTooLong: Error, CustomStringConvertible {
    var description: String { "an answer longer than \(HTTPExchange.maxBody / 1024) kB" }
}
