#if canImport(Glibc)
import Glibc
#endif
import CSocketBatch

/// Sends one datagram to many IPv4 addresses with `sendmmsg(2)`: the relay's fan-out.
///
/// One forwarded RTP packet to 200 subscribers is one system call instead of 200 `sendto`s.
/// The message headers, addresses and the single `iovec` (every message points at the same
/// bytes) live in arrays allocated once and grown only when an audience outgrows them, so
/// sending allocates nothing per packet.
public final class FanOutSender {
    public let fd: Int32
    /// Messages per `sendmmsg` call (the kernel takes at most UIO_MAXIOV = 1024).
    public let maxBatch: Int
    /// Datagrams the kernel refused (ENOBUFS, EAGAIN, …): each is a packet a subscriber lost.
    public private(set) var errors = 0
    /// `sendmmsg` calls made.
    public private(set) var calls = 0
    public private(set) var capacity = 0
    private var messages: UnsafeMutablePointer<ss_mmsghdr>
    private var names: UnsafeMutablePointer<sockaddr_in>
    private let iov: UnsafeMutablePointer<iovec>

    public init(fd: Int32, maxBatch: Int = 1024, capacity: Int = 64) {
        precondition(maxBatch >= 1 && maxBatch <= 1024)
        self.fd = fd
        self.maxBatch = maxBatch
        iov = .allocate(capacity: 1)
        iov.initialize(to: iovec())
        messages = .allocate(capacity: 1)
        names = .allocate(capacity: 1)
        grow(to: max(capacity, 1))
    }

    deinit {
        messages.deallocate()
        names.deallocate()
        iov.deallocate()
    }

    private func grow(to wanted: Int) {
        var c = max(capacity, 1)
        while c < wanted { c *= 2 }
        messages.deallocate()
        names.deallocate()
        messages = .allocate(capacity: c)
        names = .allocate(capacity: c)
        names.initialize(repeating: sockaddr_in(), count: c)
        for i in 0..<c {
            var m = ss_mmsghdr()
            m.msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
            m.msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_in>.size)
            m.msg_hdr.msg_iov = UnsafeMutableRawPointer(iov)
            m.msg_hdr.msg_iovlen = 1
            (messages + i).initialize(to: m)
        }
        capacity = c
    }

    /// Sends `bytes` to each address, in order. A datagram the kernel refuses is counted in
    /// `errors` and skipped; the others are still sent.
    public func send(_ bytes: UnsafeRawBufferPointer, toEach addresses: [PeerAddress]) {
        let n = addresses.count
        guard n > 0, let base = bytes.baseAddress else { return }
        if n > capacity { grow(to: n) }
        iov.pointee.iov_base = UnsafeMutableRawPointer(mutating: base)
        iov.pointee.iov_len = bytes.count
        for i in 0..<n { names[i] = addresses[i].sockaddr }
        var offset = 0
        while offset < n {
            let r = ss_sendmmsg(fd, messages + offset, UInt32(min(n - offset, maxBatch)), Int32(MSG_NOSIGNAL))
            calls += 1
            if r > 0 {
                offset += Int(r)
            } else if r < 0 && errno == EINTR {
                continue
            } else {
                // The message at `offset` failed (sendmmsg reports an error only for the
                // first message of a call; later ones are retried by the next call).
                errors += 1
                offset += 1
            }
        }
    }
}

/// Receives up to `count` datagrams per `recvmmsg(2)` call into buffers allocated once.
public final class ReceiveBatch {
    public let count: Int
    public let bufferSize: Int
    private let storage: UnsafeMutableRawBufferPointer
    private let messages: UnsafeMutablePointer<ss_mmsghdr>
    private let names: UnsafeMutablePointer<sockaddr_in>
    private let iovs: UnsafeMutablePointer<iovec>

    public init(count: Int = 32, bufferSize: Int = 2048) {
        self.count = count
        self.bufferSize = bufferSize
        storage = .allocate(byteCount: count * bufferSize, alignment: 16)
        messages = .allocate(capacity: count)
        names = .allocate(capacity: count)
        names.initialize(repeating: sockaddr_in(), count: count)
        iovs = .allocate(capacity: count)
        for i in 0..<count {
            (iovs + i).initialize(to: iovec(iov_base: storage.baseAddress! + i * bufferSize, iov_len: bufferSize))
            var m = ss_mmsghdr()
            m.msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
            m.msg_hdr.msg_iov = UnsafeMutableRawPointer(iovs + i)
            m.msg_hdr.msg_iovlen = 1
            (messages + i).initialize(to: m)
        }
    }

    deinit {
        storage.deallocate()
        messages.deallocate()
        names.deallocate()
        iovs.deallocate()
    }

    /// Reads the datagrams waiting on `fd` (at most `count`) without blocking; returns how many.
    public func receive(fd: Int32) -> Int {
        for i in 0..<count {
            messages[i].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_in>.size)
            messages[i].msg_len = 0
        }
        let r = ss_recvmmsg(fd, messages, UInt32(count), Int32(MSG_DONTWAIT))
        return r > 0 ? Int(r) : 0
    }

    /// Datagram `i` of the last `receive` (valid until the next one), cut to `bufferSize`.
    public func datagram(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: storage.baseAddress! + i * bufferSize, count: min(Int(messages[i].msg_len), bufferSize))
    }

    /// Where datagram `i` came from.
    public func source(_ i: Int) -> PeerAddress { PeerAddress(names[i]) }
}
