#if canImport(Glibc)
import Glibc
#endif
import CSocketBatch
import NetworkAddress

/// `count` message headers for `sendmmsg(2)`/`recvmmsg(2)`, each with its own address and a
/// slot of `slotSize` bytes of one buffer, allocated once.
private struct MessageSlots {
    let count: Int
    let slotSize: Int
    let storage: UnsafeMutableRawBufferPointer
    let messages: UnsafeMutablePointer<ss_mmsghdr>
    let names: UnsafeMutablePointer<sockaddr_in>
    let iovs: UnsafeMutablePointer<iovec>

    init(count: Int, slotSize: Int) {
        self.count = count
        self.slotSize = slotSize
        storage = .allocate(byteCount: count * slotSize, alignment: 16)
        messages = .allocate(capacity: count)
        names = .allocate(capacity: count)
        names.initialize(repeating: sockaddr_in(), count: count)
        iovs = .allocate(capacity: count)
        for i in 0..<count {
            (iovs + i).initialize(to: iovec(iov_base: storage.baseAddress! + i * slotSize, iov_len: slotSize))
            var m = ss_mmsghdr()
            m.msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
            m.msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_in>.size)
            m.msg_hdr.msg_iov = UnsafeMutableRawPointer(iovs + i)
            m.msg_hdr.msg_iovlen = 1
            (messages + i).initialize(to: m)
        }
    }

    /// Slot `i`'s bytes.
    func slot(_ i: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: storage[(i * slotSize)..<((i + 1) * slotSize)])
    }

    func deallocate() {
        storage.deallocate()
        messages.deallocate()
        names.deallocate()
        iovs.deallocate()
    }
}

/// Sends different datagrams to different addresses with one `sendmmsg(2)` per `count`: each
/// is written into a slot of its own (a packet protected per receiver: the same RTP, another
/// key each), allocated once. `add` fills the next slot and sends the batch when it is full;
/// `flush` sends what is left.
public final class SendBatch {
    public let fd: Int32
    public var count: Int { slots.count }
    public var slotSize: Int { slots.slotSize }
    /// Datagrams the kernel refused (each is a packet some receiver lost).
    public private(set) var errors = 0
    /// `sendmmsg` calls made.
    public private(set) var calls = 0
    private var used = 0
    private let slots: MessageSlots

    public init(fd: Int32, count: Int = 64, slotSize: Int = 1600) {
        precondition(count >= 1 && count <= 1024)
        self.fd = fd
        slots = MessageSlots(count: count, slotSize: slotSize)
    }

    deinit {
        flush()
        slots.deallocate()
    }

    /// Writes a datagram for `address` into the next slot: `fill` gets the slot and returns
    /// the datagram's length (nil: nothing to send, the slot stays free).
    public func add(to address: PeerAddress, _ fill: (UnsafeMutableRawBufferPointer) -> Int?) {
        guard let n = fill(slots.slot(used)), n > 0, n <= slots.slotSize else { return }
        slots.names[used] = address.sockaddr
        slots.iovs[used].iov_len = n
        used += 1
        if used == slots.count { flush() }
    }

    /// Sends the datagrams added since the last call.
    public func flush() {
        var offset = 0
        while offset < used {
            let r = ss_sendmmsg(fd, slots.messages + offset, UInt32(used - offset), Int32(MSG_NOSIGNAL))
            calls += 1
            if r > 0 {
                offset += Int(r)
            } else if r < 0 && errno == EINTR {
                continue
            } else {
                errors += 1
                offset += 1
            }
        }
        used = 0
    }
}

/// Receives up to `count` datagrams per `recvmmsg(2)` call into buffers allocated once.
public final class ReceiveBatch {
    public var count: Int { slots.count }
    public var bufferSize: Int { slots.slotSize }
    private let slots: MessageSlots

    /// Control data per message, for the kernel's arrival stamps (`SO_TIMESTAMPNS`).
    private let control: UnsafeMutableRawPointer

    public init(count: Int = 32, bufferSize: Int = 2048) {
        slots = MessageSlots(count: count, slotSize: bufferSize)
        control = .allocate(byteCount: count * Int(SS_TIMESTAMP_CONTROL), alignment: 16)
    }

    deinit {
        slots.deallocate()
        control.deallocate()
    }

    /// When the kernel received datagram `i` of the last `receive` (ns, CLOCK_REALTIME), if the
    /// socket stamps arrivals (`UDPListener.stampArrivals()`); nil otherwise.
    public func arrivalWallNanos(_ i: Int) -> UInt64? {
        let t = withUnsafePointer(to: &slots.messages[i].msg_hdr) { ss_timestamp_ns($0) }
        return t > 0 ? UInt64(t) : nil
    }

    /// Reads the datagrams waiting on `fd` (at most `count`) without blocking; returns how many.
    public func receive(fd: Int32) -> Int {
        for i in 0..<count {
            slots.messages[i].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_in>.size)
            slots.messages[i].msg_hdr.msg_control = control + i * Int(SS_TIMESTAMP_CONTROL)
            slots.messages[i].msg_hdr.msg_controllen = Int(SS_TIMESTAMP_CONTROL)
            slots.messages[i].msg_len = 0
        }
        let r = ss_recvmmsg(fd, slots.messages, UInt32(count), Int32(MSG_DONTWAIT))
        return r > 0 ? Int(r) : 0
    }

    /// Datagram `i` of the last `receive` (valid until the next one), cut to `bufferSize`.
    public func datagram(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: slots.storage.baseAddress! + i * bufferSize, count: min(Int(slots.messages[i].msg_len), bufferSize))
    }

    /// Where datagram `i` came from.
    public func source(_ i: Int) -> PeerAddress { PeerAddress(slots.names[i]) }
}
