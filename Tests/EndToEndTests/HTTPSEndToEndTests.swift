import Foundation
import Testing
import X11TestSupport

/// Issue 40: HTTPS for the hosted room's page, WHEP and invitations (`--tls-cert --tls-key`),
/// with a CA made here (openssl): curl trusting it gets the page, plain HTTP is redirected,
/// `watch https://…` joins with `--ca-file` and refuses the relay without it (76), Chromium
/// trusting the CA (an NSS database in a HOME of its own, certutil) plays, and SIGHUP takes a
/// renewed certificate without a restart.
@Suite(.serialized) struct HTTPSEndToEndTests {
    /// A CA and a server certificate for localhost and 127.0.0.1 signed by it (PEM files in `dir`).
    static func makeCertificates(_ dir: String, serial: Int = 1) throws -> (ca: String, cert: String, key: String) {
        func openssl(_ args: [String]) throws {
            let c = try Child(which("openssl"), args, dir: dir, name: "openssl-\(UUID().uuidString.prefix(6))")
            guard c.finish(within: 30) == 0 else { throw TestFailure("openssl \(args.first ?? ""): \(c.stderr)") }
        }
        let ca = "\(dir)/ca.pem", caKey = "\(dir)/ca.key"
        if !FileManager.default.fileExists(atPath: ca) {
            try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", caKey, "-out", ca,
                         "-days", "2", "-subj", "/CN=screenshare test CA"])
        }
        let key = "\(dir)/server-\(serial).key", csr = "\(dir)/server-\(serial).csr", cert = "\(dir)/server-\(serial).pem", ext = "\(dir)/ext.cnf"
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: ext, atomically: true, encoding: .utf8)
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost"])
        try openssl(["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-set_serial", String(serial), "-out", cert, "-days", "2",
                     "-extfile", ext])
        return (ca, cert, key)
    }

    /// `curl ARGS URL`: the status and the body (or the Location of a redirect).
    static func curl(_ args: [String], dir: String) throws -> (status: Int, text: String) {
        let c = try Child(which("curl"), ["-s", "-o", "\(dir)/body", "-w", "%{http_code} %{redirect_url}"] + args, dir: dir,
                          name: "curl-\(UUID().uuidString.prefix(6))")
        _ = c.finish(within: 20)
        let parts = c.stdout.split(separator: " ", maxSplits: 1).map(String.init)
        let body = (try? String(contentsOfFile: "\(dir)/body", encoding: .utf8)) ?? ""
        return (Int(parts.first ?? "") ?? -1, parts.count > 1 && !parts[1].isEmpty ? parts[1] : body)
    }

    @Test func theHostedRoomServesHTTPSAndRedirectsPlainHTTP() throws {
        let dir = try makeTempDir()
        let (ca, cert, key) = try Self.makeCertificates(dir)
        let port = freeEvenPort()
        let presenter = try BrowserWHEPTests.presenter(dir, at: ["--listen", "127.0.0.1:\(port)", "--tls-cert", cert, "--tls-key", key],
                                                       duration: 60)
        defer { _ = presenter.finish(within: 0) }
        let started = try EventLog.wait(for: "started", in: presenter)
        let link = try #require(started["browser_url"] as? String, "\(started)")
        // The link names the certificate's host, over HTTPS.
        #expect(link.hasPrefix("https://localhost:\(port)/class#k="), "\(link)")

        let page = try Self.curl(["--cacert", ca, "https://localhost:\(port)/class"], dir: dir)
        #expect(page.status == 200 && page.text.contains("<!doctype html>"), "\(page)")
        let untrusted = try Self.curl(["https://localhost:\(port)/class"], dir: dir)
        #expect(untrusted.status == 0, "curl trusting only the system's CAs: \(untrusted)")
        let plain = try Self.curl(["http://127.0.0.1:\(port)/class?from=teacher"], dir: dir)
        #expect(plain.status == 301 && plain.text == "https://127.0.0.1:\(port)/class?from=teacher", "\(plain)")

        // watch: the link's code over HTTPS, trusting the CA given; refused without it.
        let watch = try Child(screenshareBinary(), ["watch", link, "--ca-file", ca, "--headless", "--duration", "2", "--json"], dir: dir,
                              name: "watch")
        #expect(watch.finish(within: 30) == 0, "\(watch.stderr)")
        #expect((EventLog(watch.stdout).last(named: "stopped")?["frames_decoded"] as? Int ?? 0) >= 10, "\(watch.stdout.suffix(400))")
        let wary = try Child(screenshareBinary(), ["watch", link, "--headless", "--duration", "2"], dir: dir, name: "wary")
        #expect(wary.finish(within: 30) == 76 && wary.stderr.contains("does not trust"), "\(wary.stderr)")

        // Chromium, trusting the CA through an NSS database in a HOME of its own.
        let home = try makeTempDir()
        let nssdb = "\(home)/.pki/nssdb"
        try FileManager.default.createDirectory(atPath: nssdb, withIntermediateDirectories: true)
        #expect(try run(which("certutil"), ["-d", "sql:\(nssdb)", "-N", "--empty-password"]) == 0)
        #expect(try run(which("certutil"), ["-d", "sql:\(nssdb)", "-A", "-t", "C,,", "-n", "screenshare test CA", "-i", ca]) == 0)
        let chromium = try Child(BrowserWHEPTests.python, [BrowserWHEPTests.script("browser-watch.py"), link, "6"], dir: dir, name: "chromium",
                                 environment: ["HOME": home])
        #expect(chromium.finish(within: 60) == 0, "\(chromium.stderr.suffix(2000))")
        let last = try #require(EventLog(chromium.stdout).last(named: "page"), "\(chromium.stdout.suffix(1500))")
        #expect((last["frames"] as? Int ?? 0) >= 5 && last["state"] as? String == "connected", "\(last)")

        // SIGHUP: a renewed certificate is served to new connections, without a restart.
        let renewed = try Self.makeCertificates(dir, serial: 2)
        try FileManager.default.removeItem(atPath: cert)
        try FileManager.default.copyItem(atPath: renewed.cert, toPath: cert)
        try FileManager.default.removeItem(atPath: key)
        try FileManager.default.copyItem(atPath: renewed.key, toPath: key)
        kill(presenter.pid, SIGHUP)
        let serial = """
        import socket, ssl, subprocess, sys, time
        for _ in range(50):
            pem = ssl.get_server_certificate(("127.0.0.1", int(sys.argv[1])))
            out = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pem.encode(), capture_output=True).stdout.decode().strip()
            if out == "serial=02":
                break
            time.sleep(0.1)
        print(out)
        """
        let check = try Child(which("python3"), ["-c", serial, String(port)], dir: dir, name: "serial")
        #expect(check.finish(within: 30) == 0, "\(check.stderr)")
        #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "serial=02", "\(check.stdout)")
        #expect(presenter.isRunning)
    }
}
