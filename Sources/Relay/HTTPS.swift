import Basics
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// HTTPS for the relay's HTTP side (`--tls-cert FILE --tls-key FILE`): the certificate chain
/// and its key in PEM (certbot's `fullchain.pem` and `privkey.pem`), read when the relay starts
/// and again on `reload()` (SIGHUP: a renewed certificate is taken without a restart; the
/// connections open keep theirs). The page, WHEP, the room directory and the invitations are
/// then served with TLS (swift-nio-ssl) on the same port, and a plain HTTP request there is
/// redirected to HTTPS.
public final class TLSFiles: Sendable {
    public let certificatePath: String
    public let keyPath: String
    private let context: Mutex<NIOSSLContext>
    /// The certificate's first DNS name (its subject alternative names), for the links printed:
    /// a browser checks the name it was given against the certificate. Nil for an IP-only one.
    public let hostName: String?

    /// Reads the files. The error names the file and what is wrong (exit 66 in the CLI).
    public init(certificate: String, key: String) throws(FileError) {
        certificatePath = certificate
        keyPath = key
        let (context, name) = try Self.load(certificate: certificate, key: key)
        self.context = Mutex(context)
        hostName = name
    }

    /// Reads the files again; new connections get the new certificate. On an error the one in
    /// use stays, and the error says why.
    public func reload() throws(FileError) {
        let (fresh, _) = try Self.load(certificate: certificatePath, key: keyPath)
        context.withLock { $0 = fresh }
    }

    /// The context new connections are given.
    var current: NIOSSLContext { context.withLock { $0 } }

    private static func load(certificate: String, key: String) throws(FileError) -> (NIOSSLContext, String?) {
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMFile(certificate) } catch {
            throw FileError("--tls-cert '\(certificate)': not a PEM certificate chain that can be read (\(error))")
        }
        guard let leaf = chain.first else { throw FileError("--tls-cert '\(certificate)': no certificate in it") }
        let privateKey: NIOSSLPrivateKey
        do { privateKey = try NIOSSLPrivateKey(file: key, format: .pem) } catch {
            throw FileError("--tls-key '\(key)': not a PEM private key that can be read (\(error))")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                    privateKey: .privateKey(privateKey))
        configuration.minimumTLSVersion = .tlsv12
        let context: NIOSSLContext
        do { context = try NIOSSLContext(configuration: configuration) } catch {
            throw FileError("--tls-cert '\(certificate)' and --tls-key '\(key)' do not go together (\(error))")
        }
        let dnsNames = leaf._subjectAlternativeNames().filter { $0.nameType == .dnsName }
            .map { $0.contents.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) } }
        return (context, dnsNames.first { !$0.hasPrefix("*") })
    }
}

/// The first handler of a connection to a relay that serves HTTPS: a TLS handshake (its first
/// byte is 22, a handshake record) gets TLS and then HTTP; anything else gets plain HTTP that
/// answers every request with a redirect to the same address over HTTPS.
final class HTTPSOrRedirect: ChannelInboundHandler, RemovableChannelHandler {
    // Made and used on its channel's event loop only.
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let tls: TLSFiles
    private let timeoutNanos: UInt64
    private let then: (ChannelPipeline.SynchronousOperations, ChannelHandler) throws -> Void
    private var timer: Scheduled<Void>?

    /// - Parameters:
    ///   - timeoutNanos: a connection that sends nothing this long is closed.
    ///   - then: adds the HTTP handlers after the given one (TLS's).
    init(tls: TLSFiles, timeoutNanos: UInt64, then: @escaping (ChannelPipeline.SynchronousOperations, ChannelHandler) throws -> Void) {
        self.tls = tls
        self.timeoutNanos = timeoutNanos
        self.then = then
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeoutNanos))) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        let pipeline = context.pipeline.syncOperations
        do {
            if bytes.readableBytesView.first == 22 {
                let ssl = NIOSSLServerHandler(context: tls.current)
                try pipeline.addHandler(ssl, position: .after(self))
                try then(pipeline, ssl)
            } else {
                try pipeline.configureHTTPServerPipeline(position: .after(self))
                try pipeline.addHandlers([RequestDeadline(timeoutNanos: timeoutNanos), RedirectToHTTPS()], position: .last)
            }
        } catch {
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(data)
        pipeline.removeHandler(context: context, promise: nil)
    }
}

/// Plain HTTP on a port that serves HTTPS: every request is answered 301 with the same
/// address over HTTPS (the Host header's host and port), and the connection is closed.
final class RedirectToHTTPS: ChannelInboundHandler {
    // Made and used on its channel's event loop only.
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        let host = head.headers["host"].first.map { String($0.prefix(255)) } ?? (context.channel.localAddress.map { "\($0.ipAddress ?? ""):\($0.port ?? 0)" } ?? "")
        let location = "https://\(host)\(head.uri.hasPrefix("/") ? head.uri : "/")"
        let body = "this relay serves HTTPS: \(location)\n"
        var headers = HTTPHeaders()
        headers.add(name: "Location", value: location)
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.utf8.count))
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .movedPermanently, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
