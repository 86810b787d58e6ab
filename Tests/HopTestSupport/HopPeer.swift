import Foundation
import Room
import SRTP
import Transport
import WebRTC
#if canImport(Glibc)
import Glibc
#endif

/// A room peer that tests drive by hand over the relay's encrypted hop (room protocol v3): a
/// DTLS client on its own UDP socket, control messages (any bytes, malformed ones too) as DTLS
/// application data, media as SRTP and SRTCP with the exported keys.
public final class HopPeer {
    /// What came from the relay, opened.
    public enum Incoming {
        case control([UInt8])
        case media([UInt8])
    }

    public let socket: UDPListener
    public let relay: sockaddr_in
    public let dtls: DTLSTransport
    public private(set) var srtp: SRTPFlow?
    private var buffer = [UInt8](repeating: 0, count: 65536)
    private var nextID: UInt32 = 1000

    /// - Parameter pinned: the relay certificate's SHA-256 to insist on (nil: any).
    public init(relayPort: UInt16, pinned: [UInt8]? = nil) throws {
        socket = try UDPListener(host: "127.0.0.1", port: 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = relayPort.bigEndian
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        relay = a
        dtls = try DTLSTransport(role: .client, certificate: try DTLSCertificate(), remoteFingerprint: pinned)
    }

    /// Runs the handshake to its end.
    /// - Throws: when it fails or takes longer than `seconds`.
    public func connect(seconds: Double = 10) throws {
        dtls.start()
        flush()
        let deadline = Date().addingTimeInterval(seconds)
        while dtls.state == .handshaking {
            guard Date() < deadline else { throw HopPeerError("the DTLS handshake with the relay did not finish in \(seconds) s") }
            if let n = receiveDatagram(timeoutMillis: 50) {
                buffer.withUnsafeBytes { _ = dtls.receive(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            } else if let t = dtls.timeoutMillis, t == 0 {
                dtls.handleTimeout()
            }
            flush()
        }
        guard dtls.state == .connected, let keys = dtls.keys else { throw HopPeerError("DTLS: \(dtls.state)") }
        srtp = try SRTPFlow(profile: keys.profile, sendKey: keys.clientKey + keys.clientSalt, receiveKey: keys.serverKey + keys.serverSalt)
    }

    /// Sends `bytes` as one control message (DTLS application data).
    public func send(control bytes: [UInt8]) {
        try? bytes.withUnsafeBytes { try dtls.send($0) }
        flush()
    }

    public func send(_ message: ControlMessage, requestID: UInt32 = 0) {
        send(control: ControlEnvelope(requestID: requestID, message).encoded())
    }

    /// Sends an RTP or RTCP packet, SRTP-protected.
    public func send(media packet: [UInt8]) {
        packet.withUnsafeBytes { p in _ = srtp?.protect(p) { socket.send($0, to: relay) } }
    }

    /// Hands what arrives to `take` until it returns false or `seconds` pass.
    public func drain(seconds: Double, _ take: (Incoming) -> Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard let n = receiveDatagram(timeoutMillis: 20) else { continue }
            if n > 0, (20...63).contains(buffer[0]) {
                let messages = buffer.withUnsafeBytes { dtls.receive(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                flush()
                for m in messages where !take(.control(m)) { return }
            } else if let srtp {
                let plain = buffer.withUnsafeMutableBytes { srtp.unprotect($0, length: n) }
                if let plain, !take(.media(Array(buffer[0..<plain]))) { return }
            }
        }
    }

    /// Sends a request (again every 300 ms) until the relay answers it.
    /// - Throws: when no answer comes in `seconds`.
    public func ask(_ message: ControlMessage, seconds: Double = 5) throws -> ControlMessage {
        nextID += 1
        return try ask(control: ControlEnvelope(requestID: nextID, message).encoded(), requestID: nextID, seconds: seconds)
    }

    /// Sends raw control bytes (again every 300 ms) until a message with `requestID` answers.
    public func ask(control bytes: [UInt8], requestID: UInt32, seconds: Double = 5) throws -> ControlMessage {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            send(control: bytes)
            var answer: ControlMessage?
            drain(seconds: 0.3) { incoming in
                guard case .control(let m) = incoming,
                      let e = try? ControlEnvelope.parse(m, maxSize: RoomProtocol.maxRelayMessageSize), e.requestID == requestID else { return true }
                answer = e.message
                return false
            }
            if let answer { return answer }
        }
        throw HopPeerError("no answer to request \(requestID)")
    }

    private func flush() {
        while let d = dtls.takeOutgoing() { d.withUnsafeBytes { _ = socket.send($0, to: relay) } }
    }

    private func receiveDatagram(timeoutMillis: Int32) -> Int? {
        var pfd = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, timeoutMillis) > 0 else { return nil }
        var from = sockaddr_in()
        let n = buffer.withUnsafeMutableBytes { socket.receive(into: $0, from: &from) }
        return n > 0 ? n : nil
    }
}

public struct HopPeerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
