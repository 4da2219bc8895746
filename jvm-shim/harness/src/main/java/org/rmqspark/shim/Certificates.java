package org.rmqspark.shim;

import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
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
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.util.Date;

/**
 * Test certificates, PEM (keys as PKCS#8), valid for the names localhost, 127.0.0.1 and ::1 so that a client
 * connecting to the loopback address verifies them without overriding the target name:
 * <ul>
 * <li>{@link #selfSigned}: one self-signed server certificate (--tls: name server, brokers and gateway);</li>
 * <li>{@link #privateCa}: a private CA, a server certificate and a client certificate it signed (--tls-ca: brokers,
 * name server and gateway serve the server certificate and require a client certificate from that CA).</li>
 * </ul>
 */
public final class Certificates {
    public final File certificate;
    public final File privateKey;
    /** With {@link #privateCa}: the CA certificate, and the client certificate and key it signed; else null. */
    public final File ca;
    public final File clientCertificate;
    public final File clientKey;

    private Certificates(File certificate, File privateKey, File ca, File clientCertificate, File clientKey) {
        this.certificate = certificate;
        this.privateKey = privateKey;
        this.ca = ca;
        this.clientCertificate = clientCertificate;
        this.clientKey = clientKey;
    }

    public static Certificates selfSigned(File dir) throws Exception {
        Files.createDirectories(dir.toPath());
        KeyPair keys = newKeys();
        X500Name subject = new X500Name("CN=localhost");
        X509CertificateHolder cert = sign(subject, keys, subject, keys.getPrivate(), false, true);
        File certFile = new File(dir, "gateway-cert.pem");
        File keyFile = new File(dir, "gateway-key.pem");
        writePem(certFile, cert);
        writeKey(keyFile, keys);
        return new Certificates(certFile, keyFile, null, null, null);
    }

    public static Certificates privateCa(File dir) throws Exception {
        Files.createDirectories(dir.toPath());
        KeyPair caKeys = newKeys();
        X500Name caName = new X500Name("CN=rmq-spark test CA");
        X509CertificateHolder ca = sign(caName, caKeys, caName, caKeys.getPrivate(), true, false);
        KeyPair serverKeys = newKeys();
        X509CertificateHolder server = sign(new X500Name("CN=localhost"), serverKeys, caName, caKeys.getPrivate(),
            false, true);
        KeyPair clientKeys = newKeys();
        X509CertificateHolder client = sign(new X500Name("CN=rmq-spark-client"), clientKeys, caName,
            caKeys.getPrivate(), false, false);
        File caFile = new File(dir, "ca.pem");
        File serverCert = new File(dir, "server-cert.pem");
        File serverKey = new File(dir, "server-key.pem");
        File clientCert = new File(dir, "client-cert.pem");
        File clientKey = new File(dir, "client-key.pem");
        writePem(caFile, ca);
        writePem(serverCert, server);
        writeKey(serverKey, serverKeys);
        writePem(clientCert, client);
        writeKey(clientKey, clientKeys);
        return new Certificates(serverCert, serverKey, caFile, clientCert, clientKey);
    }

    private static KeyPair newKeys() throws Exception {
        KeyPairGenerator gen = KeyPairGenerator.getInstance("RSA");
        gen.initialize(2048, new SecureRandom());
        return gen.generateKeyPair();
    }

    /** A certificate of {@code subject} signed by {@code issuerKey}: a CA, a server one (loopback names) or a client. */
    private static X509CertificateHolder sign(X500Name subject, KeyPair keys, X500Name issuer, PrivateKey issuerKey,
                                              boolean isCa, boolean isServer) throws Exception {
        long now = System.currentTimeMillis();
        JcaX509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(issuer,
            new BigInteger(64, new SecureRandom()), new Date(now - 86_400_000L),
            new Date(now + 365L * 86_400_000L), subject, keys.getPublic());
        builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(isCa));
        if (isCa) {
            builder.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign));
        } else {
            builder.addExtension(Extension.keyUsage, true,
                new KeyUsage(KeyUsage.digitalSignature | KeyUsage.keyEncipherment));
            builder.addExtension(Extension.extendedKeyUsage, false,
                new ExtendedKeyUsage(isServer ? KeyPurposeId.id_kp_serverAuth : KeyPurposeId.id_kp_clientAuth));
        }
        if (isServer) {
            builder.addExtension(Extension.subjectAlternativeName, false, new GeneralNames(new GeneralName[] {
                new GeneralName(GeneralName.dNSName, "localhost"),
                new GeneralName(GeneralName.iPAddress, "127.0.0.1"),
                new GeneralName(GeneralName.iPAddress, "::1"),
            }));
        }
        return builder.build(new JcaContentSignerBuilder("SHA256withRSA").build(issuerKey));
    }

    private static void writeKey(File f, KeyPair keys) throws IOException {
        writePem(f, new org.bouncycastle.openssl.jcajce.JcaPKCS8Generator(keys.getPrivate(), null));
    }

    private static void writePem(File f, Object o) throws IOException {
        try (Writer w = Files.newBufferedWriter(f.toPath(), StandardCharsets.US_ASCII);
             JcaPEMWriter pem = new JcaPEMWriter(w)) {
            pem.writeObject(o);
        }
    }
}
