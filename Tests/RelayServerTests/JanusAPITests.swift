import Basics
import Events
import Foundation
import Testing
@testable import Relay

/// Janus's HTTP API as the relay speaks it: the bodies it sends, and Janus 1.1.2's own answers
/// (recorded from Debian 12's `janus`) read back, errors and garbage included.
struct JanusAPITests {
    static let created = #"{"janus":"success","session_id":5462212018311893,"transaction":"t3","sender":5164558270088788,"plugindata":{"plugin":"janus.plugin.streaming","data":{"streaming":"created","created":"mp-6081659044656729","permanent":false,"stream":{"id":6081659044656729,"type":"live","description":"class","is_private":false,"ports":[{"type":"video","mid":"v","port":41002},{"type":"audio","mid":"a","port":41003}]}}}}"#

    /// With `rtcpport` asked for, Janus names it.
    static let createdWithRTCP = #"{"janus":"success","session_id":8848397072643288,"transaction":"t3","sender":5031294939419541,"plugindata":{"plugin":"janus.plugin.streaming","data":{"streaming":"created","created":"mp-8936903949144524","permanent":false,"stream":{"id":8936903949144524,"type":"live","description":"mp-8936903949144524","is_private":true,"ports":[{"type":"video","mid":"v","port":41000,"rtcp_port":41001},{"type":"audio","mid":"a","port":41002}]}}}}"#

    @Test func aCreatedMountpointsIdAndPortsAreRead() throws {
        #expect(try JanusAPI.readCreated(Self.created) == JanusAPI.Mountpoint(id: 6081659044656729, videoPort: 41002, audioPort: 41003))
        #expect(try JanusAPI.readCreated(Self.createdWithRTCP)
            == JanusAPI.Mountpoint(id: 8936903949144524, videoPort: 41000, audioPort: 41002, videoRTCPPort: 41001))
        #expect(try JanusAPI.readID(#"{"janus":"success","transaction":"t1","data":{"id":5462212018311893}}"#) == 5462212018311893)
        try JanusAPI.readAck(#"{"janus":"ack","session_id":1,"transaction":"k"}"#)
    }

    @Test func janussRefusalsAreReadWithTheirCodes() {
        let wrongKey = #"{"janus":"success","session_id":1,"transaction":"t4","sender":2,"plugindata":{"plugin":"janus.plugin.streaming","data":{"streaming":"event","error_code":457,"error":"Unauthorized (wrong admin_key)"}}}"#
        #expect(throws: JanusAPI.Failure(code: 457, reason: "Unauthorized (wrong admin_key)")) { try JanusAPI.readCreated(wrongKey) }
        #expect((try? JanusAPI.readCreated(wrongKey)) == nil)
        let noSession = #"{"janus":"error","session_id":5462212018311893,"transaction":"t5","error":{"code":458,"reason":"No such session 5462212018311893"}}"#
        do {
            try JanusAPI.readAck(noSession)
            Issue.record("an error read as an ack")
        } catch {
            #expect(error.isSessionGone && error.reason == "No such session 5462212018311893")
        }
    }

    @Test(arguments: [
        ("", "not JSON"), ("<html>hello</html>", "not JSON"), ("[1,2]", "not JSON"), (#"{"hello":1}"#, "no \"janus\" field"),
        (#"{"janus":"success"}"#, "no plugin data"), (#"{"janus":"success","plugindata":{"data":{"streaming":"created","stream":{"id":-4}}}}"#, "names no mountpoint"),
        (#"{"janus":"success","plugindata":{"data":{"streaming":"created","stream":{"id":7,"ports":[{"type":"video","port":70000}]}}}}"#, "no video port"),
        (#"{"janus":"timeout"}"#, "not success"),
    ])
    func garbageIsRefusedSayingWhat(_ answer: String, _ why: String) {
        do {
            _ = try JanusAPI.readCreated(answer)
            Issue.record("'\(answer)' read as a mountpoint")
        } catch {
            #expect(error.code == nil && error.reason.contains(why), "\(error)")
        }
    }

    /// What `create` asks: VP8 and Opus with our payload types on ports Janus picks, SRTP
    /// (suite 80) with the 30-byte key in base64, the secret, the pin only for a room behind
    /// tokens, the admin key; private and not saved to Janus's configuration.
    @Test func theCreateRequestCarriesTheStreamsAndTheKey() throws {
        let key = (0..<30).map { UInt8($0) }
        var request = JanusAPI.MountpointRequest(description: "class", secret: "s3cret", pin: "1234", videoPayloadType: 96,
                                                 audioPayloadType: 111, srtpKey: key, adminKey: "adminkey")
        let body = JanusAPI.create(request)
        #expect(body["srtpsuite"] == 80 && body["srtpcrypto"] == .string(Data(key).base64EncodedString()))
        #expect(Data(base64Encoded: Data(key).base64EncodedString())?.count == 30)
        #expect(body["secret"] == "s3cret" && body["pin"] == "1234" && body["admin_key"] == "adminkey" && body["description"] == "class")
        #expect(body["type"] == "rtp" && body["is_private"] == true && body["permanent"] == false)
        #expect(body["media"] == .array([
            .object(["type": "video", "mid": "v", "port": 0, "rtcpport": 0, "pt": 96, "codec": "vp8"]),
            .object(["type": "audio", "mid": "a", "port": 0, "pt": 111, "codec": "opus"]),
        ]))
        request.pin = nil
        request.adminKey = nil
        let open = JanusAPI.create(request)
        #expect(open["pin"] == nil && open["admin_key"] == nil)
        let message = JanusAPI.message(JanusAPI.destroy(id: 7, secret: "s"), transaction: "x1")
        let parsed = try JSONDecoder().decode(JSONValue.self, from: Data(message.utf8))
        #expect(parsed == .object(["janus": "message", "transaction": "x1",
                                   "body": .object(["request": "destroy", "id": 7, "secret": "s", "permanent": false])]))
    }

    @Test func aJanusURLIsReadAndAWrongOneSaysWhatIsWrong() throws {
        let s = try JanusServer(parsing: "http://10.0.0.7:8088/janus")
        #expect(s == JanusServer(secure: false, host: "10.0.0.7", port: 8088, path: "/janus"))
        #expect(try JanusServer(parsing: "https://janus.example/janus/").description == "https://janus.example:8089/janus")
        #expect(try JanusServer(parsing: "http://janus-2").path == "/janus")
        for (bad, why) in [("10.0.0.7:8088", "not an http"), ("http://:8088/janus", "names no host"), ("http://h:0/janus", "port"),
                           ("http://h:99999/janus", "port"), ("http://h:80/janus?x=1", "base path"), ("http://h@evil:80/", "names no host")] {
            #expect(throws: SettingError.self) { try JanusServer(parsing: bad) }
            do { _ = try JanusServer(parsing: bad) } catch { #expect(error.reason.contains(why), "\(bad): \(error)") }
        }
    }
}
