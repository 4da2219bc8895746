package org.rmqspark.shim;

import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.cert.X509CertificateHolder;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

import java.io.File;
import java.io.IOException;
import java.io.Writer;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.SecureRandom;
import java.util.Date;

/**
 * A self-signed server certificate for tests and demos, made at start: subject CN=localhost, valid for the names
 * localhost, 127.0.0.1 and ::1, so a client that trusts this one certificate can connect to the loopback address
 * without overriding the target name. Written as PEM (certificate, and the key as PKCS#8).
 */
public final class Certificates {
    public final File certificate;
    public final File privateKey;

    private Certificates(File certificate, File privateKey) {
        this.certificate = certificate;
        this.privateKey = privateKey;
    }

    public static Certificates create(File dir) throws Exception {
        Files.createDirectories(dir.toPath());
        KeyPairGenerator gen = KeyPairGenerator.getInstance("RSA");
        gen.initialize(2048, new SecureRandom());
        KeyPair keys = gen.generateKeyPair();
        X500Name subject = new X500Name("CN=localhost");
        long now = System.currentTimeMillis();
        JcaX509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(subject,
            new BigInteger(64, new SecureRandom()), new Date(now - 86_400_000L),
            new Date(now + 365L * 86_400_000L), subject, keys.getPublic());
        builder.addExtension(Extension.subjectAlternativeName, false, new GeneralNames(new GeneralName[] {
            new GeneralName(GeneralName.dNSName, "localhost"),
            new GeneralName(GeneralName.iPAddress, "127.0.0.1"),
            new GeneralName(GeneralName.iPAddress, "::1"),
        }));
        builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(false));
        X509CertificateHolder cert = builder.build(
            new JcaContentSignerBuilder("SHA256withRSA").build(keys.getPrivate()));
        File certFile = new File(dir, "gateway-cert.pem");
        File keyFile = new File(dir, "gateway-key.pem");
        writePem(certFile, cert);
        writePem(keyFile, new org.bouncycastle.openssl.jcajce.JcaPKCS8Generator(keys.getPrivate(), null));
        return new Certificates(certFile, keyFile);
    }

    private static void writePem(File f, Object o) throws IOException {
        try (Writer w = Files.newBufferedWriter(f.toPath(), StandardCharsets.US_ASCII);
             JcaPEMWriter pem = new JcaPEMWriter(w)) {
            pem.writeObject(o);
        }
    }
}
